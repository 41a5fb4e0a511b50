"""Bad rosbag2 input: a damaged SQLite file, a metadata.yaml that lies (counts, missing
files, wrong storage id, absurd values, paths outside the bag), truncated MCAP storage,
broken zstd, non-UTF-8 names, an interrupted write.  Every failure is a polybag error, a
reader yields every intact message before raising, and ``recover`` rebuilds the bag."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbag2_helpers import polybag_view, rosbags_view, write_rosbags_bag

import polybag
from polybag.errors import OutputExistsError, PolybagError, UnsupportedError


def _bag(tmp_path: Path, storage: str = "sqlite3", n: int = 30, **kw: object) -> Path:
    bag = tmp_path / f"bag_{storage}"
    write_rosbags_bag(bag, storage=storage, n=n, **kw)  # type: ignore[arg-type]
    return bag


def _edit_meta(bag: Path, change: Callable[[dict], None]) -> None:
    doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    change(doc["rosbag2_bagfile_information"])
    (bag / "metadata.yaml").write_text(yaml.safe_dump(doc))


def _read_all(path: Path, **kw: object) -> tuple[int, PolybagError | None]:
    """Messages read before the first error, and the error (a polybag one, or the test fails)."""
    n = 0
    try:
        with polybag.open(path, **kw) as r:
            _ = r.summary
            for m in r.messages():
                bytes(m.data)
                n += 1
    except PolybagError as e:
        return n, e
    return n, None


# --- metadata.yaml that lies ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda m: m.update(version="nine"), "version: expected an integer"),
        (lambda m: m.update(version=42), "newer than polybag reads"),
        (lambda m: m.update(version=0), "not a rosbag2 version"),
        (lambda m: m.update(message_count=-5), "out of range"),
        (lambda m: m.update(message_count=10**30), "out of range"),
        (lambda m: m.update(starting_time={"nanoseconds_since_epoch": "soon"}), "expected an integer"),
        (lambda m: m.update(relative_file_paths=["../../etc/passwd"]), "outside the bag directory"),
        (lambda m: m.update(relative_file_paths=["/etc/passwd"]), "outside the bag directory"),
        (lambda m: m.update(relative_file_paths=["gone_0.db3"]), "missing: gone_0.db3"),
        (lambda m: m.update(topics_with_message_count=[{"topic_metadata": 5}]), "expected a mapping"),
        (lambda m: m.update(topics_with_message_count="many"), "expected a list"),
        (lambda m: m.update(compression_mode="file", compression_format="lz4"), "not zstd"),
        (lambda m: m.update(compression_mode="sometimes"), "not file or message"),
    ],
)
def test_lying_metadata_is_a_polybag_error(
    tmp_path: Path, change: Callable[[dict], None], match: str
) -> None:
    bag = _bag(tmp_path)
    _edit_meta(bag, change)
    with pytest.raises(PolybagError, match=match):
        with polybag.open(bag) as r:
            list(r.messages())


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"rosbag2_bagfile_information: [",
        b"- just\n- a list\n",
        b"\xff\xfe\x00garbage",
        b"a: b\n",
        b"x" * 100,
    ],
)
def test_metadata_that_is_not_metadata(tmp_path: Path, text: bytes) -> None:
    bag = _bag(tmp_path)
    (bag / "metadata.yaml").write_bytes(text)
    with pytest.raises(PolybagError):
        polybag.open(bag)


def test_counts_that_lie_give_the_real_messages(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    real = polybag_view(bag)

    def lie(m: dict) -> None:
        m["message_count"] = 3
        for t in m["topics_with_message_count"]:
            t["message_count"] = 1
        m["duration"]["nanoseconds"] = 1

    _edit_meta(bag, lie)
    with polybag.open(bag) as r:
        assert r.summary.message_count == 2  # what the file says ...
        assert len(list(r.messages())) == len(real)  # ... and what is there
    assert polybag_view(bag) == real


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_the_storage_id_that_lies_is_ignored(tmp_path: Path, storage: str) -> None:
    bag = _bag(tmp_path, storage)
    real = polybag_view(bag)
    _edit_meta(bag, lambda m: m.update(storage_identifier="mcap" if storage == "sqlite3" else "sqlite3"))
    assert polybag_view(bag) == real  # the files' own bytes say what they are


def test_a_storage_file_that_is_neither(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    (bag / "bag_sqlite3.db3").write_bytes(b"hello, not a database" * 10)
    with pytest.raises(PolybagError, match="not an SQLite or MCAP storage file"):
        polybag.open(bag)


# --- damaged storage ---------------------------------------------------------------------------
def test_damaged_sqlite_pages(tmp_path: Path) -> None:
    bag = _bag(tmp_path, n=3000)
    db = bag / "bag_sqlite3.db3"
    data = bytearray(db.read_bytes())
    total = len(polybag_view(bag))
    for off in range(len(data) // 2, len(data) - 4096, 4096):  # smash pages in the second half
        data[off + 100 : off + 300] = b"\xa5" * 200
    db.write_bytes(bytes(data))
    n, err = _read_all(bag)
    assert err is None or n < total
    got, rerr = _read_all(bag, recover=True)
    assert rerr is None
    assert 0 < got <= total


def test_a_bad_row_comes_after_every_intact_message(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    real = polybag_view(bag)
    con = sqlite3.connect(bag / "bag_sqlite3.db3")
    (bad_time,) = con.execute("SELECT timestamp FROM messages WHERE id = 20").fetchone()
    con.execute("UPDATE messages SET data = 5 WHERE id = 20")
    con.commit()
    con.close()
    n, err = _read_all(bag)
    assert err is not None and "has no data" in str(err)
    assert n == sum(1 for m in real if m[2] < bad_time)  # every message before it in log-time order
    with polybag.open(bag, recover=True) as r:
        assert len(list(r.messages())) == len(real) - 1
        assert r.recovery_report is not None and any("has no data" in e for e in r.recovery_report["errors"])


@pytest.mark.parametrize("cut", [100, 4096, 20000, -1000])
def test_truncated_sqlite(tmp_path: Path, cut: int) -> None:
    bag = _bag(tmp_path, n=1500)
    db = bag / "bag_sqlite3.db3"
    data = db.read_bytes()
    db.write_bytes(data[:cut])
    _read_all(bag)  # a polybag error or fewer messages, never a raw exception
    _read_all(bag, recover=True)


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_truncated_mcap_storage_yields_what_is_intact(tmp_path: Path, cut: float) -> None:
    bag = _bag(tmp_path, "mcap", n=3000)
    f = bag / "bag_mcap.mcap"
    data = f.read_bytes()
    real = polybag_view(bag)
    f.write_bytes(data[: int(len(data) * cut)])
    n, err = _read_all(bag)
    assert err is not None and n < len(real)
    with polybag.open(bag, recover=True) as r:
        got = [(m.topic, m.channel.type_name, m.log_time, bytes(m.data)) for m in r.messages()]
        assert r.recovery_report is not None and r.recovery_report["errors"]
    assert 0 < len(got) < len(real) and all(m in real for m in got)


def test_broken_zstd_file_and_message(tmp_path: Path) -> None:
    bag = tmp_path / "f"
    write_rosbags_bag(bag, compression="file")
    z = next(bag.glob("*.zstd"))
    z.write_bytes(z.read_bytes()[:200])
    n, err = _read_all(bag)
    assert err is not None
    bag2 = tmp_path / "m"
    write_rosbags_bag(bag2, compression="message")
    con = sqlite3.connect(next(bag2.glob("*.db3")))
    con.execute("UPDATE messages SET data = x'28b52ffd00deadbeef' WHERE id = 5")
    con.commit()
    con.close()
    n, err = _read_all(bag2)
    assert err is not None and "does not decompress" in str(err) and n >= 1
    got, rerr = _read_all(bag2, recover=True)
    assert rerr is None and got == 29


def test_a_message_on_an_unknown_topic(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    con = sqlite3.connect(bag / "bag_sqlite3.db3")
    con.execute("UPDATE messages SET topic_id = 99 WHERE id = 7")
    con.commit()
    con.close()
    n, err = _read_all(bag)
    assert err is not None and "topic id 99" in str(err)
    assert _read_all(bag, recover=True) == (29, None)


def test_non_utf8_names(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    con = sqlite3.connect(bag / "bag_sqlite3.db3")
    con.execute("UPDATE topics SET name = CAST(x'2f61ff62' AS TEXT) WHERE id = 1")
    con.commit()
    con.close()
    with polybag.open(bag, recover=True) as r:
        topics = {c.topic for c in r.summary.channels.values()}
        assert "/a\ufffdb" in topics
        assert len(list(r.messages())) == 30
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bag\xff"))
    shutil.copytree(bag, odd)
    with polybag.open(odd) as r:
        assert len(list(r.messages())) == 30


def test_hot_journal_is_rolled_back_in_a_copy(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    db = bag / "bag_sqlite3.db3"
    before = db.read_bytes()
    (bag / "bag_sqlite3.db3-journal").write_bytes(b"")  # an (empty) journal next to it
    assert len(polybag_view(bag)) == 30
    assert db.read_bytes() == before and (bag / "bag_sqlite3.db3-journal").exists()


# --- writing: refusals and an interrupted write -------------------------------------------------
def test_existing_outputs_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputExistsError):
        polybag.Writer(str(out), format="rosbag2", overwrite=False)
    with pytest.raises(OutputExistsError, match="not a rosbag2 bag"):  # (refused before writing, issue 26)
        polybag.Writer(str(out), format="rosbag2", overwrite=True)  # never deletes a directory that holds other things
    assert (out / "keep.txt").read_text() == "mine" and not (tmp_path / "out.active").exists()
    (tmp_path / "x.active").mkdir()
    with pytest.raises(OutputExistsError, match="in progress"):
        polybag.Writer(str(tmp_path / "x"), format="rosbag2", overwrite=False)
    w = polybag.Writer(str(tmp_path / "y"), format="rosbag2")
    w.abort(discard=True)
    assert not (tmp_path / "y.active").exists() and not (tmp_path / "y").exists()
    with pytest.raises(UnsupportedError):
        polybag.Writer(str(tmp_path / "z"), format="rosbag2", storage="leveldb")
    with pytest.raises(PolybagError, match="needs a message type"):
        w = polybag.Writer(str(tmp_path / "z"), format="rosbag2")
        try:
            w.add_channel("/t", "cdr", None, {})
        finally:
            w.abort(discard=True)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_an_interrupted_write_is_recovered(tmp_path: Path, storage: str) -> None:
    from polybag.ops import recover

    out = tmp_path / "rec"
    opts: dict[str, object] = {"chunk_size": 2048} if storage == "mcap" else {}
    w = polybag.Writer(str(out), format="rosbag2", storage=storage, **opts)
    s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
    ch = w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "- depth: 3"})
    for i in range(2000):
        w.write(ch, b"\0\1\0\0\4\0\0\0abc\0", i + 1)
        if storage == "sqlite3" and i == 1500:
            w._db.flush()  # type: ignore[attr-defined] # a batch committed as a long recording would
    w.abort()  # as a killed writer leaves it: metadata.yaml as last refreshed (its counts lag)
    active = tmp_path / "rec.active"
    assert active.is_dir() and (active / "metadata.yaml").exists()
    with pytest.warns(Warning, match="did not close"), polybag.open(active) as r:  # opens as it is
        assert r.summary.message_count == sum(1 for _ in r.messages()) > 1000
    res = recover(active, tmp_path / "fixed", format="rosbag2")
    assert res.verified and res.messages > 1000
    with polybag.open(tmp_path / "fixed") as r:
        assert r.summary.indexed and r.summary.message_count == res.messages
        times = [m.log_time for m in r.messages()]
        assert times == list(range(1, res.messages + 1))
        ch2 = next(iter(r.summary.channels.values()))
        assert ch2.metadata["offered_qos_profiles"] == "- depth: 3"


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_reindex_rebuilds_metadata_in_place(tmp_path: Path, storage: str) -> None:
    from polybag.formats.rosbag2.reindex import reindex_rosbag2

    bag = _bag(tmp_path, storage)
    before = polybag_view(bag)
    original = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    with pytest.raises(OutputExistsError):
        reindex_rosbag2(bag)
    (bag / "metadata.yaml").unlink()
    rep = reindex_rosbag2(bag)
    assert rep["messages"] == 30 and rep["topics"] == 2
    assert polybag_view(bag) == before
    assert rosbags_view(bag) == [(t, ty, time, d) for t, ty, time, d in before]
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    for key in ("message_count", "starting_time", "duration", "relative_file_paths", "storage_identifier"):
        assert meta[key] == original[key]
    assert {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]} == {
        t["topic_metadata"]["name"]: t["message_count"] for t in original["topics_with_message_count"]
    }
    _edit_meta(bag, lambda m: m.update(message_count=1))  # a lie, fixed with overwrite
    reindex_rosbag2(bag, overwrite=True)
    assert (
        yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]["message_count"]
        == 30
    )


def test_reindex_refuses_damaged_storage(tmp_path: Path) -> None:
    from polybag.formats.rosbag2.reindex import reindex_rosbag2

    bag = _bag(tmp_path, "mcap", n=2000)
    (bag / "metadata.yaml").unlink()
    f = bag / "bag_mcap.mcap"
    f.write_bytes(f.read_bytes()[:5000])
    with pytest.raises(PolybagError, match="polybag recover"):
        reindex_rosbag2(bag)
    assert not (bag / "metadata.yaml").exists()


# --- hypothesis: any metadata, any bytes: a polybag error at worst ---------------------------------
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 70), 1 << 70),
    st.text(max_size=12),
    st.floats(allow_nan=True),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "version",
        "storage_identifier",
        "relative_file_paths",
        "files",
        "topics_with_message_count",
        "message_count",
        "starting_time",
        "duration",
        "compression_mode",
        "compression_format",
        "custom_data",
    ]
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4))
def test_any_metadata_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory, changes: dict) -> None:
    global _FUZZ_BAG
    if _FUZZ_BAG is None:
        _FUZZ_BAG = _bag(tmp_path_factory.mktemp("fuzzsrc"))
    bag = tmp_path_factory.mktemp("fuzz") / "bag_sqlite3"
    shutil.copytree(_FUZZ_BAG, bag)
    _edit_meta(bag, lambda m: m.update(changes))
    for recover in (False, True):
        _read_all(bag, recover=recover)


_FUZZ_BAG: Path | None = None


@pytest.mark.filterwarnings("ignore::UserWarning")  # the MCAP reader's warnings about the damage
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    storage=st.sampled_from(["sqlite3", "mcap"]),
    hits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=8)),
        min_size=1,
        max_size=6,
    ),
)
def test_any_damaged_storage_is_read_or_refused(
    tmp_path_factory: pytest.TempPathFactory, storage: str, hits: list[tuple[float, bytes]]
) -> None:
    src = _FUZZ_STORAGE.get(storage)
    if src is None:
        src = _FUZZ_STORAGE[storage] = _bag(tmp_path_factory.mktemp("fsrc"), storage, n=200)
    bag = tmp_path_factory.mktemp("fz") / src.name
    shutil.copytree(src, bag)
    f = next(p for p in bag.iterdir() if p.name != "metadata.yaml")
    data = bytearray(f.read_bytes())
    for where, junk in hits:
        at = int(where * len(data))
        data[at : at + len(junk)] = junk
    f.write_bytes(bytes(data))
    for recover in (False, True):
        _read_all(bag, recover=recover)


_FUZZ_STORAGE: dict[str, Path] = {}


def test_metadata_aliases_cannot_multiply_topics(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    entry = "{topic_metadata: {name: /x, type: a/msg/B, serialization_format: cdr}, message_count: 1}"
    many = ", ".join(["*t"] * 70000)
    text = (
        "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: sqlite3\n"
        f"  relative_file_paths: [bag_sqlite3.db3]\n  anchor: &t {entry}\n  topics_with_message_count: [{many}]\n"
    )
    (bag / "metadata.yaml").write_text(text)
    with pytest.raises(PolybagError, match="more than the 65536|YAML expands to more than"):
        polybag.open(bag)


def test_final_rename_never_clobbers_what_appeared(tmp_path: Path) -> None:
    dst = tmp_path / "late"
    w = polybag.Writer(str(dst), format="rosbag2", overwrite=False)
    s = w.add_schema("std_msgs/msg/Empty", "ros2msg", b"")
    w.write(w.add_channel("/e", "cdr", s), b"\0\1\0\0\0\0\0\0", 1)
    dst.write_bytes(b"someone else's")
    with pytest.raises(OutputExistsError, match="appeared"):
        w.close()
    assert dst.read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late"]


def test_recovering_a_message_compressed_bag_without_metadata(tmp_path: Path) -> None:
    from polybag.ops import recover

    w = polybag.Writer(str(tmp_path / "mc"), format="rosbag2", compression="zstd", compression_mode="message")
    s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
    ch = w.add_channel("/a", "cdr", s)
    payloads = [
        b"\0\1\0\0" + len(t).to_bytes(4, "little") + t for t in (f"m{i}".encode() + b"\0" for i in range(50))
    ]
    for i, p in enumerate(payloads):
        w.write(ch, p, i + 1)
    w._db.flush()  # type: ignore[attr-defined]
    w.abort()
    res = recover(tmp_path / "mc.active", tmp_path / "fixed", format="rosbag2")
    assert res.messages == 50
    assert [bytes(m[3]) for m in polybag_view(tmp_path / "fixed")] == payloads


def test_a_damaged_btree_cannot_loop_the_row_walk(tmp_path: Path) -> None:
    """A .db3 with random bytes written over pages (found by fuzzing): SQLite's walk by row
    id came back to earlier rows for ever; the recovering read now ends, noting the damage."""
    bag = tmp_path / "looping_walk"
    shutil.copytree(Path(__file__).parent / "data" / "looping_walk", bag)
    n, err = _read_all(bag)
    assert err is not None
    with polybag.open(bag, recover=True) as r:
        got = sum(1 for _ in r.messages())
        report = r.recovery_report
    assert 0 < got <= 300 and report is not None and 0 < len(report["errors"]) <= 202


def test_metadata_types_spelled_otherwise_make_no_phantom_topics(tmp_path: Path) -> None:
    bag = _bag(tmp_path)

    def old_spelling(m: dict) -> None:
        for t in m["topics_with_message_count"]:
            t["topic_metadata"]["type"] = t["topic_metadata"]["type"].replace("/msg/", "/")

    _edit_meta(bag, old_spelling)
    with polybag.open(bag) as r:
        chans = r.summary.channels.values()
        assert sorted((c.topic, c.type_name) for c in chans) == [
            ("/chatter", "std_msgs/msg/String"),
            ("/imu", "sensor_msgs/msg/Imu"),
        ]
        assert r.summary.topic_message_counts() == {"/chatter": 20, "/imu": 10}
        assert len(list(r.messages())) == 30
