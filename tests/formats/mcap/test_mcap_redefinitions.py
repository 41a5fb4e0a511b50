"""Issue 12, "silent changes of meaning": MCAP files that redefine a channel or schema id.

The spec wants each id defined once (repeats identical).  A file that redefines one anyway
is read as written: every message carries the channel in force where it lies (the last
Channel record with its id before it in file order), `check` reports the redefinition,
and convert/filter keep each version's messages on their own topic.

Files are crafted record by record here (polybag's writer refuses a reused id): every
payload starts with the topic it must be read on, so a test can tell for each message.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from mcap_helpers import Pipe
from polybag.cli import main
from polybag.formats.mcap import records as R

# one item of a file: ("S", id, name, encoding, data) | ("C", id, schema id, topic, metadata) | ("M", channel id, time)
Item = tuple[Any, ...]


def _payload(topic: str, i: int) -> bytes:
    text = f"{topic}#{i}".encode()
    return struct.pack("<I", len(text)) + text  # a ROS 1 std_msgs/String


def _topic_of(data: bytes | memoryview) -> str:
    return bytes(data)[4:].decode().split("#")[0]


def build(
    groups: list[list[Item]],
    chunked: str = "per_group",
    summary: str = "none",
    compression: str = "",
    message_index: bool = True,
) -> tuple[bytes, list[tuple[str, int]]]:
    """A file of ``groups`` of items (one chunk per group, one chunk, or no chunks) and its
    messages in file order as (topic in force, log time).

    ``summary``: "none" (no summary section), "earlier"/"later" (one Schema/Channel record
    per id: the first or the last definition), "all" (every record, as written).
    """
    out = bytearray(R.MAGIC + R.encode(R.Header("", "test-redef")))
    schemas: list[R.SchemaRecord] = []
    channels: list[R.ChannelRecord] = []
    in_force: dict[int, str] = {}
    expect: list[tuple[str, int]] = []
    counts: Counter[int] = Counter()
    seq = 0

    def record(it: Item) -> bytes:
        nonlocal seq
        if it[0] == "S":
            s = R.SchemaRecord(it[1], it[2], it[3], it[4])
            schemas.append(s)
            return R.encode(s)
        if it[0] == "C":
            c = R.ChannelRecord(it[1], it[2], it[3], "ros1", dict(it[4]))
            channels.append(c)
            in_force[c.id] = c.topic
            return R.encode(c)
        cid, t = it[1], it[2]
        topic = in_force[cid]
        expect.append((topic, t))
        counts[cid] += 1
        seq += 1
        return R.encode(R.MessageRecord(cid, seq, t, t, _payload(topic, seq)))

    chunk_indexes: list[R.ChunkIndex] = []
    if chunked == "none":
        for g in groups:
            for it in g:
                out += record(it)
    else:
        for g in groups if chunked == "per_group" else [[it for grp in groups for it in grp]]:
            body = bytearray()
            index: dict[int, list[tuple[int, int]]] = {}
            times = []
            for it in g:
                if it[0] == "M":
                    index.setdefault(it[1], []).append((it[2], len(body)))
                    times.append(it[2])
                body += record(it)
            raw = bytes(body)
            packed = zstandard.ZstdCompressor().compress(raw) if compression == "zstd" else raw
            chunk = R.Chunk(min(times, default=0), max(times, default=0), len(raw), zlib.crc32(raw), compression, packed)
            at = len(out)
            out += R.encode(chunk)
            length = len(out) - at
            offsets = {}
            mi_at = len(out)
            if message_index:
                for cid, entries in index.items():
                    offsets[cid] = len(out)
                    out += R.encode(R.MessageIndex(cid, entries))
            chunk_indexes.append(
                R.ChunkIndex(
                    chunk.message_start_time, chunk.message_end_time, at, length, offsets, len(out) - mi_at,
                    compression, len(packed), len(raw),
                )
            )  # fmt: skip
    out += R.encode(R.DataEnd(0))
    summary_start = 0
    if summary != "none":
        summary_start = len(out)
        defs: list[Any]
        if summary == "all":
            defs = [*schemas, *channels]
        else:
            pick: dict[tuple[str, int], Any] = {}
            for rec in [*schemas, *channels]:
                k = (type(rec).__name__, rec.id)
                if summary == "later" or k not in pick:
                    pick[k] = rec
            defs = sorted(pick.values(), key=lambda r: isinstance(r, R.ChannelRecord))
        for rec in defs:
            out += R.encode(rec)
        times = [t for _, t in expect]
        out += R.encode(
            R.Statistics(
                len(expect), len({s.id for s in schemas}), len({c.id for c in channels}), 0, 0, len(chunk_indexes),
                min(times, default=0), max(times, default=0), dict(counts),
            )
        )  # fmt: skip
        for ci in chunk_indexes:
            out += R.encode(ci)
    out += R.encode(R.Footer(summary_start, 0, 0)) + R.MAGIC
    return bytes(out), expect


STRING = ("std_msgs/String", "ros1msg", b"string data\n")


def redef_groups(late_b: bool = True) -> list[list[Item]]:
    """Channel 1 is /a for 5 messages, then /b for 5; channel 2 (/c) throughout.  With
    ``late_b`` /b's times follow /a's, else they come first (log-time order differs)."""
    ta, tb = (range(0, 5), range(5, 10)) if late_b else (range(10, 15), range(0, 5))
    a: list[Item] = [("S", 1, *STRING), ("C", 1, 1, "/a", {}), ("C", 2, 1, "/c", {})]
    a += [("M", 1, t) for t in ta] + [("M", 2, t) for t in ta]
    b: list[Item] = [("C", 1, 1, "/b", {})]
    b += [("M", 1, t) for t in tb] + [("M", 2, t) for t in tb]
    return [a, b]


def topics(msgs: Any) -> list[tuple[str, int]]:
    out = []
    for m in msgs:
        assert m.topic == _topic_of(m.data), f"message {bytes(m.data)!r} read on {m.topic}"
        out.append((m.topic, m.log_time))
    return out


def by_time(expect: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return sorted(expect, key=lambda x: x[1])  # stable: ties in file order


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, _err = capsys.readouterr()
    return code, out


# Layouts whose redefinition any read sees before it relies on the summary: no summary, a
# summary that holds both definitions, or no chunks (the top-level records are scanned).
DETECTED = [
    (chunked, summary, comp)
    for chunked in ("per_group", "one", "none")
    for summary in ("none", "all") + (("earlier", "later") if chunked == "none" else ())
    for comp in ("", "zstd")
    if not (chunked == "none" and comp)
]


@pytest.mark.parametrize("late_b", [True, False])
@pytest.mark.parametrize(("chunked", "summary", "comp"), DETECTED)
def test_every_read_keeps_the_channel_in_force(chunked: str, summary: str, comp: str, late_b: bool) -> None:
    data, expect = build(redef_groups(late_b), chunked, summary, comp)
    assert Counter(t for t, _ in expect) == {"/a": 5, "/b": 5, "/c": 10}

    def read(**kw: Any) -> list[tuple[str, int]]:
        with polybag.open(io.BytesIO(data)) as r:
            return topics(r.messages(**kw))

    assert read(order="file") == expect
    assert read(order="file", reverse=True) == expect[::-1]
    assert read() == by_time(expect)
    assert read(reverse=True) == by_time(expect)[::-1]
    for t in ("/a", "/b", "/c"):
        want = [x for x in expect if x[0] == t]
        assert read(topics=[t], order="file") == want
        assert read(topics=[t]) == by_time(want)
        assert read(topics=t) == by_time(want)  # a regular expression
    assert read(topics="/[ab]", order="file") == [x for x in expect if x[0] in ("/a", "/b")]
    for lo, hi in ((0, 3), (3, 8), (7, 100), (12, 13)):
        assert read(start=lo, end=hi) == by_time([x for x in expect if lo <= x[1] < hi])
        assert read(start=lo, end=hi, topics=["/b"], order="file") == [x for x in expect if lo <= x[1] < hi and x[0] == "/b"]
    with polybag.open(Pipe(data)) as r:  # streamed, strictly forward
        assert topics(r.messages(order="file")) == expect
    with polybag.open(Pipe(data)) as r:
        assert topics(r.messages(order="file", topics=["/b"])) == [x for x in expect if x[0] == "/b"]
    with polybag.open(Pipe(data)) as r:  # log-time order reads the stream into memory first
        assert topics(r.messages()) == by_time(expect)
    with polybag.open(io.BytesIO(data)) as r:
        s = r.summary
        assert s.topic_message_counts() == {"/a": 5, "/b": 5, "/c": 10}
        assert len(s.channels) == 3 and len({c.id for c in s.channels.values()}) == 3
        assert sorted(c.topic for c in s.channels.values()) == ["/a", "/b", "/c"]
        assert s.message_count == 20
        lt, _blob, _starts, sizes = r.topic_payloads("/b")
        assert lt.tolist() == [t for tp, t in by_time(expect) if tp == "/b"]
        assert len(sizes) == 5


@pytest.mark.parametrize("summary", ["earlier", "later"])
@pytest.mark.parametrize("chunked", ["per_group", "one"])
@pytest.mark.parametrize("late_b", [True, False])
def test_summary_with_one_version_complete_reads_are_right(chunked: str, summary: str, late_b: bool) -> None:
    """The summary names one version per id and its statistics agree with it: a read of
    every message finds the redefinition in the chunks; from then on the reader (summary,
    filters, windows) follows every definition."""
    data, expect = build(redef_groups(late_b), chunked, summary, "zstd")
    for kw in ({"order": "file"}, {}, {"reverse": True}, {"order": "file", "reverse": True}):
        with polybag.open(io.BytesIO(data)) as r:
            got = topics(r.messages(**kw))
            assert Counter(got) == Counter(expect), kw
            if kw == {"order": "file"}:
                assert got == expect
            elif kw == {}:
                assert got == by_time(expect)
            assert r.summary.topic_message_counts() == {"/a": 5, "/b": 5, "/c": 10}
            assert topics(r.messages(topics=["/b"], order="file")) == [x for x in expect if x[0] == "/b"]
            assert topics(r.messages(start=7, end=100)) == by_time([x for x in expect if x[1] >= 7])
            assert any("redefines channel id 1" in p for p in r.definition_problems)  # type: ignore[attr-defined]


@pytest.mark.parametrize("summary", ["earlier", "later"])
@pytest.mark.parametrize("chunked", ["per_group", "one"])
def test_summary_with_one_version_filters_and_windows(chunked: str, summary: str) -> None:
    """On a fresh reader: a time window notices a redefinition in the chunks it reads, and a
    filter matching none of the summary's channels (the version it leaves out) reads every
    definition first.  (A filter on the version the summary names trusts the summary, as the
    mcap library's indexed reader does: checking every chunk for definitions would cost topic
    reads a gather over all their messages; a complete read or `check` finds it.)"""
    data, expect = build(redef_groups(), chunked, summary, "zstd")
    hidden = "/b" if summary == "earlier" else "/a"
    cases: list[tuple[dict[str, Any], list[tuple[str, int]]]] = [
        ({"topics": [hidden]}, by_time([x for x in expect if x[0] == hidden])),
        ({"topics": [hidden], "order": "file"}, [x for x in expect if x[0] == hidden]),
        ({"start": 6, "end": 100}, by_time([x for x in expect if x[1] >= 6])),
        ({"start": 6, "reverse": True}, by_time([x for x in expect if x[1] >= 6])[::-1]),
        ({"start": 6, "order": "file"}, [x for x in expect if x[1] >= 6]),
    ]
    for kw, want in cases:
        with polybag.open(io.BytesIO(data)) as r:
            assert topics(r.messages(**kw)) == want, kw
    with polybag.open(io.BytesIO(data)) as r:
        lt, _b, _s, _z = r.topic_payloads(hidden)
        assert len(lt) == 5


def test_check_reports_the_redefinition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for chunked, summary in (("none", "none"), ("per_group", "earlier"), ("one", "later"), ("per_group", "all")):
        p = tmp_path / f"redef_{chunked}_{summary}.mcap"
        p.write_bytes(build(redef_groups(), chunked, summary)[0])
        code, out = run(capsys, "check", "--json", str(p))
        assert code == 1, (chunked, summary, out)
        (res,) = json.loads(out)
        assert res["messages"] == 20
        msgs = [q["message"] for q in res["problems"] if "redefines channel id 1" in q["message"]]
        assert len(msgs) == 1, res["problems"]
        assert "'/a' -> '/b'" in msgs[0]
        offsets = [q["offset"] for q in res["problems"] if "redefines channel id 1" in q["message"]]
        assert offsets[0] is not None and offsets[0] > 8
        assert "defined at offset" in msgs[0]
        code, out = run(capsys, "check", str(p))
        assert code == 1 and "redefines channel id 1" in out


def test_identical_repeats_are_not_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Channels repeated in every chunk (allowed, and common): one channel, no problem."""
    groups: list[list[Item]] = []
    for k in range(3):
        g: list[Item] = [("S", 1, *STRING), ("C", 1, 1, "/a", {"k": "v"}), ("C", 2, 1, "/c", {})]
        g += [("M", 1, 10 * k + i) for i in range(3)] + [("M", 2, 10 * k + i) for i in range(3)]
        groups.append(g)
    for chunked in ("per_group", "none"):
        for summary in ("none", "all"):
            data, expect = build(groups, chunked, summary, "zstd" if chunked != "none" else "")
            p = tmp_path / f"rep_{chunked}_{summary}.mcap"
            p.write_bytes(data)
            code, out = run(capsys, "check", str(p))
            assert code == 0, out
            with polybag.open(p) as r:
                assert topics(r.messages(order="file")) == expect
                assert r.summary.topic_message_counts() == {"/a": 9, "/c": 9}
                assert sorted(r.summary.channels) == [1, 2]
                assert r.definition_problems == []  # type: ignore[attr-defined]
            with polybag.open(Pipe(data)) as r:
                assert topics(r.messages(order="file")) == expect
                assert r.definition_problems == []  # type: ignore[attr-defined]


def test_schema_redefinition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Schema id 1 redefined: the channels on it read with the new schema from there on,
    whether or not their Channel records are repeated."""
    other = ("pkg/Other", "ros1msg", b"string data\nint32 extra\n")
    for resend in (True, False):
        a: list[Item] = [("S", 1, *STRING), ("C", 1, 1, "/a", {})] + [("M", 1, t) for t in range(3)]
        b: list[Item] = [("S", 1, *other)] + ([("C", 1, 1, "/a", {})] if resend else []) + [("M", 1, t) for t in range(3, 6)]
        for chunked, summary in (("per_group", "none"), ("one", "all"), ("none", "later")):
            data, _ = build([a, b], chunked, summary)
            p = tmp_path / f"schema_{resend}_{chunked}.mcap"
            p.write_bytes(data)
            for src in (io.BytesIO(data), Pipe(data)):
                with polybag.open(src) as r:
                    got = [(m.topic, m.channel.schema.name, m.log_time) for m in r.messages(order="file")]
                assert got == [("/a", "std_msgs/String", t) for t in range(3)] + [("/a", "pkg/Other", t) for t in range(3, 6)]
            with polybag.open(p) as r:
                s = r.summary
                assert sorted(sc.name for sc in s.schemas.values()) == ["pkg/Other", "std_msgs/String"]
                assert sorted((c.topic, c.schema.name, s.message_counts[c.id]) for c in s.channels.values()) == [
                    ("/a", "pkg/Other", 3),
                    ("/a", "std_msgs/String", 3),
                ]
            code, out = run(capsys, "check", str(p))
            assert code == 1 and "Schema record redefines schema id 1" in out and "'std_msgs/String' -> 'pkg/Other'" in out


@pytest.mark.parametrize("fmt", ["bag", "mcap"])
@pytest.mark.parametrize(("chunked", "summary"), [("per_group", "none"), ("one", "all"), ("none", "earlier")])
def test_convert_filter_cat_keep_each_version_on_its_topic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, chunked: str, summary: str
) -> None:
    src = tmp_path / "in.mcap"
    src.write_bytes(build(redef_groups(late_b=False), chunked, summary, "zstd" if chunked != "none" else "")[0])
    out = tmp_path / f"out.{fmt}"
    code, _ = run(capsys, "convert", str(src), str(out))
    assert code == 0
    with polybag.open(out) as r:
        assert r.summary.topic_message_counts() == {"/a": 5, "/b": 5, "/c": 10}
        for m in r.messages():
            assert m.topic == _topic_of(m.data)
            assert m.decode().data.startswith(m.topic + "#")
    filtered = tmp_path / f"b.{fmt}"
    code, _ = run(capsys, "filter", str(src), str(filtered), "--include-topic", "/b")
    assert code == 0
    with polybag.open(filtered) as r:
        assert r.summary.topic_message_counts() == {"/b": 5}
    code, text = run(capsys, "cat", str(src), "--json")
    assert code == 0
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    assert Counter(x["topic"] for x in lines) == {"/a": 5, "/b": 5, "/c": 10}
    for x in lines:
        assert json.dumps(x).count(x["topic"] + "#") == 1


def test_mcap_library_streamed_reader_agrees(tmp_path: Path) -> None:
    """The mcap library's stream reader keeps the channel in force too (its indexed reader
    uses the summary's one Channel record per id for every message)."""
    from mcap.reader import make_reader

    for chunked, summary in (("none", "none"), ("per_group", "none"), ("one", "none")):
        data, expect = build(redef_groups(), chunked, summary)
        theirs = [(ch.topic, m.log_time) for _s, ch, m in make_reader(io.BytesIO(data)).iter_messages(log_time_order=False)]
        assert theirs == expect
        with polybag.open(io.BytesIO(data)) as r:
            assert topics(r.messages(order="file")) == theirs


# --- property: any sequence of (re)definitions, in any layout ---------------------------------
@st.composite
def _files(draw: Any) -> tuple[list[list[Item]], str, str]:
    names = ["/a", "/b", "/c", "/d"]
    groups: list[list[Item]] = []
    defined: set[int] = set()
    t = 0
    for _ in range(draw(st.integers(1, 4))):
        g: list[Item] = [] if groups else [("S", 1, *STRING)]
        for _ in range(draw(st.integers(1, 8))):
            kind = draw(st.sampled_from(["C", "M", "M", "M"])) if defined else "C"
            if kind == "C":
                cid = draw(st.integers(1, 3))
                g.append(("C", cid, 1, draw(st.sampled_from(names)), {}))
                defined.add(cid)
            else:
                t = draw(st.sampled_from([t, t + 1, max(0, t - 3)]))
                g.append(("M", draw(st.sampled_from(sorted(defined))), t))
        groups.append(g)
    chunked = draw(st.sampled_from(["per_group", "one", "none"]))
    # with chunks, a summary naming one version per id is believed by filtered reads
    return groups, chunked, draw(st.sampled_from(["none", "all"] + (["earlier", "later"] if chunked == "none" else [])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files())
def test_property_messages_follow_the_definitions(case: tuple[list[list[Item]], str, str]) -> None:
    groups, chunked, summary = case
    data, expect = build(groups, chunked, summary)
    with polybag.open(io.BytesIO(data)) as r:
        assert topics(r.messages(order="file")) == expect
    with polybag.open(io.BytesIO(data)) as r:
        assert topics(r.messages()) == by_time(expect)
        counts = {k: v for k, v in r.summary.topic_message_counts().items() if v}
        assert counts == dict(Counter(tp for tp, _ in expect))
    with polybag.open(Pipe(data)) as r:
        assert topics(r.messages(order="file")) == expect
    with polybag.open(io.BytesIO(data)) as r:
        assert topics(r.messages(topics=["/b"])) == by_time([x for x in expect if x[0] == "/b"])
    with polybag.open(io.BytesIO(data)) as r:
        assert topics(r.messages(reverse=True, topics="/[ab]")) == by_time([x for x in expect if x[0] in ("/a", "/b")])[::-1]
    with polybag.open(io.BytesIO(data)) as r:
        assert topics(r.messages(order="file", start=2, end=4)) == [x for x in expect if 2 <= x[1] < 4]


@pytest.mark.parametrize("name", ["mcap_indexed-_Bad-walk_defs.bin", "mcap_indexed-_Bad-short_record_head.bin"])
def test_fuzz_reproducers_resolving_definitions_raise_polybag_errors(name: str) -> None:
    """Damage met while looking ahead for a channel's (or schema's) definition, in another
    chunk, is a FormatError naming that chunk (it escaped as an internal exception)."""
    data = (Path(__file__).resolve().parents[3] / "fuzz" / "repros" / name).read_bytes()
    failures = 0
    for kw in ({}, {"recover": True}, {"validate_crcs": False}):
        for mode in ("file", "log_time", "summary", "stream"):
            try:
                with polybag.open(Pipe(data) if mode == "stream" else io.BytesIO(data), **kw) as r:
                    if mode == "summary":
                        assert r.summary.message_count >= 0
                    elif mode == "stream":
                        sum(1 for _ in r.messages(order="file"))
                    else:
                        sum(1 for _ in r.messages(order=mode))
                        sum(1 for _ in r.messages(order=mode, reverse=True))
                        assert r.summary.message_count >= 0
            except polybag.errors.PolybagError as e:
                failures += 1
                assert "offset" in str(e) or "at " in str(e)
    assert failures < 12  # recover reads what it can
