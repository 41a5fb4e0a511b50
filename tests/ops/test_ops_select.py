"""filter, merge, split, sort and du against brute-force models (read everything, select in Python)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from ops_helpers import BAGS, CORPORA, rows, sorted_rows
from polybag import ops
from polybag.cli import main
from polybag.errors import EmptySelectionError, UsageError

EXAMPLE = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
MULTI = CORPORA / "rosbag" / "rosbag2_bag_v2" / "test_bag_multiple_connections.bag"
FROST = CORPORA / "rosbag" / "frost" / "decompressed.bag"
EXT = [".bag", ".mcap"]


def _ext_ok(ext: str) -> None:
    if ext == ".mcap":
        try:
            import polybag.formats.mcap.writer  # noqa: F401
        except ImportError:
            pytest.skip("MCAP writer not available yet")


def _start(path: Path) -> int:
    with polybag.open(path) as r:
        return int(r.summary.start_time or 0)


# --- filter ------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", EXT)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    include=st.lists(
        st.sampled_from(["/turtle1/.*", "/tf", "/rosout.*", "/nothing", ".*color.*"]), max_size=2
    ),
    exclude=st.lists(st.sampled_from(["/turtle2/.*", "/tf", ".*pose"]), max_size=2),
    window=st.one_of(st.none(), st.tuples(st.integers(-1, 12), st.integers(0, 14))),
)
def test_filter_matches_brute_force(
    tmp_path_factory: pytest.TempPathFactory, ext: str, include: list[str], exclude: list[str], window
) -> None:  # type: ignore[no-untyped-def]
    _ext_ok(ext)
    out = tmp_path_factory.mktemp("f") / f"out{ext}"
    start = end = None
    base = _start(EXAMPLE)
    if window is not None:
        # a start before the log's: an absolute time (a relative time is not negative)
        start = f"+{window[0]}s" if window[0] >= 0 else f"{base + window[0] * 10**9}ns"
        end = f"+{window[1]}.5"
        if window[1] + 0.5 < window[0]:  # an end before the start is refused, nothing written
            with pytest.raises(UsageError, match="before the start"):
                ops.filter(EXAMPLE, out, include_topics=include, exclude_topics=exclude, start=start, end=end)
            assert not out.exists()
            return
    kept = {t for t, *_ in rows(EXAMPLE) if (not include or any(re.fullmatch(p, t) for p in include)) and not any(re.fullmatch(p, t) for p in exclude)}
    if not kept:  # a selection that leaves no topic is said (issue 27), nothing written
        with pytest.raises(EmptySelectionError):
            ops.filter(EXAMPLE, out, include_topics=include, exclude_topics=exclude, start=start, end=end)
        assert not out.exists()
        return
    res = ops.filter(EXAMPLE, out, include_topics=include, exclude_topics=exclude, start=start, end=end)

    def keep(topic: str, t: int) -> bool:
        if include and not any(re.fullmatch(p, topic) for p in include):
            return False
        if any(re.fullmatch(p, topic) for p in exclude):
            return False
        if window is not None and not (base + window[0] * 10**9 <= t < base + window[1] * 10**9 + 5 * 10**8):
            return False
        return True

    want = [r for r in rows(EXAMPLE) if keep(r[0], r[1])]
    assert res.messages == len(want)
    assert sorted_rows(rows(out)) == sorted_rows(want)


def test_filter_expression_on_decoded_messages(tmp_path: Path) -> None:
    out = tmp_path / "o.bag"
    res = ops.filter(EXAMPLE, out, expression="topic == '/turtle1/pose' and m.x > 5.5 and t.to_sec() > 0")
    want = []
    with polybag.open(EXAMPLE) as r:
        for m in r.messages(topics=["/turtle1/pose"]):
            if m.decode().x > 5.5:
                want.append((m.channel.topic, m.log_time, bytes(m.data)))
    assert 0 < len(want) < 1500
    assert res.messages == len(want)
    assert sorted_rows(rows(out)) == sorted_rows(want)


def test_filter_expression_without_m_does_not_decode(tmp_path: Path) -> None:
    out = tmp_path / "o.bag"
    base = _start(EXAMPLE)
    res = ops.filter(EXAMPLE, out, expression=f"t.secs % 2 == 0 and t >= {base}")
    want = [r for r in rows(EXAMPLE) if (r[1] // 10**9) % 2 == 0]
    assert res.messages == len(want) > 0
    assert sorted_rows(rows(out)) == sorted_rows(want)


def test_filter_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.bag"
    code = main(
        ["filter", str(EXAMPLE), str(out), "-i", "/turtle1/.*", "-x", ".*pose", "--start", "+1s", "--json"]
    )
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["topics"]) == {"/turtle1/cmd_vel", "/turtle1/color_sensor"}
    base = _start(EXAMPLE)
    want = [r for r in rows(EXAMPLE) if r[0] in set(d["topics"]) and r[1] >= base + 10**9]
    assert d["messages"] == len(want)
    assert sorted_rows(rows(out)) == sorted_rows(want)
    # a broken expression is a clean error
    assert main(["filter", str(EXAMPLE), str(tmp_path / "x.bag"), "m.nope >"]) == 3
    assert not (tmp_path / "x.bag").exists() and not (tmp_path / "x.bag.active").exists()


# --- merge -------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", EXT)
def test_merge_matches_brute_force(tmp_path: Path, ext: str) -> None:
    _ext_ok(ext)
    inputs = [EXAMPLE, MULTI, FROST, EXAMPLE]
    out = tmp_path / f"m{ext}"
    res = ops.merge(out, inputs)
    want = sorted_rows([r for p in inputs for r in rows(p, order="log_time")])
    got = rows(out, order="log_time")
    assert res.messages == len(want)
    assert [r[1] for r in got] == [r[1] for r in want]
    assert sorted(got) == sorted(want)
    # EXAMPLE twice: its channels are written once
    with polybag.open(out) as r:
        n_channels = len(r.summary.channels)
    with polybag.open(EXAMPLE) as a, polybag.open(MULTI) as b, polybag.open(FROST) as c:
        distinct = len(a.summary.channels) + len(b.summary.channels) + len(c.summary.channels)
    assert n_channels == res.channels == distinct
    assert res.input_messages == [len(rows(p)) for p in inputs]


def test_merge_reports_type_conflicts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.bag", tmp_path / "b.bag"
    with polybag.Writer(str(a)) as w:
        c = w.add_channel("/x", "ros1", w.add_schema("std_msgs/String", "ros1msg", b"string data\n"))
        w.write(c, b"\x01\x00\x00\x00a", log_time=5)
    with polybag.Writer(str(b)) as w:
        c = w.add_channel("/x", "ros1", w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data\n"))
        w.write(c, b"\x07\x00\x00\x00", log_time=3)
    res = ops.merge(tmp_path / "m.bag", [a, b])
    assert len(res.conflicts) == 1 and "/x" in res.conflicts[0]
    assert rows(tmp_path / "m.bag", order="log_time") == [
        ("/x", 3, b"\x07\x00\x00\x00"),
        ("/x", 5, b"\x01\x00\x00\x00a"),
    ]


# --- split -------------------------------------------------------------------------------
def _split_parts(res: ops.SplitResult) -> list[list[tuple[str, int, bytes]]]:
    return [rows(p.path, order="log_time") for p in res.parts]


@pytest.mark.parametrize("ext", EXT)
def test_split_by_duration(tmp_path: Path, ext: str) -> None:
    _ext_ok(ext)
    src = tmp_path / f"in{ext}"
    if ext == ".bag":
        src.write_bytes(EXAMPLE.read_bytes())
    else:
        ops.convert(EXAMPLE, src)
    res = ops.split(src, duration="3s")
    allrows = rows(src, order="log_time")
    base = allrows[0][1]
    groups: dict[int, list] = {}
    for r in allrows:
        groups.setdefault((r[1] - base) // (3 * 10**9), []).append(r)
    want = [groups[k] for k in sorted(groups)]
    got = _split_parts(res)
    assert [len(g) for g in got] == [len(g) for g in want]
    assert [sorted(g) for g in got] == [sorted(g) for g in want]
    assert [Path(p.path).name for p in res.parts] == [f"in_{i:03d}{ext}" for i in range(len(want))]
    assert res.messages == len(allrows)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(-2, 16), min_size=1, max_size=4))
def test_split_at_times(tmp_path_factory: pytest.TempPathFactory, secs: list[int]) -> None:
    d = tmp_path_factory.mktemp("s")
    allrows = rows(EXAMPLE, order="log_time")
    base = _start(EXAMPLE)
    res = ops.split(EXAMPLE, at=[f"+{s}s" if s >= 0 else f"{base + s * 10**9}ns" for s in secs], output_dir=d)
    points = sorted(base + s * 10**9 for s in secs)
    import bisect

    groups: dict[int, list] = {}
    for r in allrows:
        groups.setdefault(bisect.bisect_right(points, r[1]), []).append(r)
    want = [sorted(groups[k]) for k in sorted(groups)]
    assert [sorted(g) for g in _split_parts(res)] == want


def test_split_by_size(tmp_path: Path) -> None:
    res = ops.split(EXAMPLE, size=50_000, output_dir=tmp_path)
    got = _split_parts(res)
    assert len(got) > 5
    flat = [r for g in got for r in g]
    assert sorted(flat) == sorted(rows(EXAMPLE))
    for g in got:
        assert sum(len(r[2]) + 32 for r in g) <= 50_000 or len(g) == 1
    # parts are contiguous in time
    for a, b in zip(got, got[1:]):
        assert a[-1][1] <= b[0][1]


def test_split_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["split", str(FROST), "--duration", "10s", "-o", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["parts"]) == 10 and sum(p["messages"] for p in d["parts"]) == 300


# --- sort --------------------------------------------------------------------------------
def test_sort_unsorted_chunks(tmp_path: Path) -> None:
    src = CORPORA / "rosbag" / "cruise-rosbag.js" / "example-unsorted-chunks.bag"
    res = ops.sort(src, tmp_path / "s.bag")
    got = rows(tmp_path / "s.bag")  # file order of the output
    assert [r[1] for r in got] == sorted(r[1] for r in rows(src))
    assert sorted(got) == sorted(rows(src))
    assert res.messages == 3 and res.was_sorted is False


@pytest.mark.parametrize("bag", BAGS[:12], ids=[b.name for b in BAGS[:12]])
def test_sort_keeps_everything(bag: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.bag"
    ops.sort(bag, out)
    assert rows(out) == sorted_rows(rows(bag, order="log_time"))


# --- du ----------------------------------------------------------------------------------
def test_du_matches_brute_force(capsys: pytest.CaptureFixture[str]) -> None:
    res = ops.du(EXAMPLE)
    per_topic: dict[str, int] = {}
    per_type: dict[str, int] = {}
    with polybag.open(EXAMPLE) as r:
        for m in r.messages():
            per_topic[m.channel.topic] = per_topic.get(m.channel.topic, 0) + len(m.data)
            per_type[m.channel.type_name] = per_type.get(m.channel.type_name, 0) + len(m.data)
    assert {u.name: u.bytes for u in res.topics} == per_topic
    assert {u.name: u.bytes for u in res.schemas} == per_type
    assert res.payload_bytes == sum(per_topic.values()) and res.messages == 8647
    assert abs(sum(u.share for u in res.topics) - 1.0) < 1e-9
    assert main(["du", str(EXAMPLE), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["topics"][0]["bytes"] == max(per_topic.values())
    assert main(["du", str(EXAMPLE)]) == 0
    assert "/turtle1/color_sensor" in capsys.readouterr().out


def test_merge_and_sort_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", str(tmp_path / "m.bag"), str(FROST), str(MULTI), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["messages"] == 306 and d["input_messages"] == [300, 6] and d["conflicts"] == []
    assert main(["sort", str(tmp_path / "m.bag"), str(tmp_path / "s.mcap"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["messages"] == 306
    assert rows(tmp_path / "s.mcap") == sorted_rows(rows(tmp_path / "m.bag", order="log_time"))


def test_progress_only_when_asked_or_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops.convert(EXAMPLE, tmp_path / "a.bag")  # library default: silent
    assert capsys.readouterr().err == ""
    assert main(["convert", str(EXAMPLE), str(tmp_path / "b.bag")]) == 0  # stderr is not a terminal here
    assert "[" not in capsys.readouterr().err
    ops.convert(EXAMPLE, tmp_path / "c.bag", progress=True)
    err = capsys.readouterr().err
    assert "convert" in err and "100.0%" in err
