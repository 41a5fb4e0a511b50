"""split and merge keep a ULog's extras: info, multi-info, parameters (initial, default,
changed), dropouts, logged strings, start timestamp; checked with pyulog."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyulog import ULog

import polybag
from polybag import ops
from polybag.cli import main
from polybag.formats.ulog.writer import UlogWriter

ULOG_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "ulog"
SAMPLE = ULOG_DIR / "sample.ulg"  # 6 parameter changes, 4 dropouts, 4 logged strings
TAGGED = ULOG_DIR / "sample_logging_tagged_and_default_params.ulg"  # tagged strings, defaults
SMALL = ULOG_DIR / "sample_log_small.ulg"  # multi-info, a dropout

Data = dict[str, np.ndarray]


# --- helpers -------------------------------------------------------------------------------
def topics(u: ULog) -> dict[tuple[str, int], Data]:
    out: dict[tuple[str, int], Data] = {}
    for d in u.data_list:
        assert (d.name, d.multi_id) not in out, f"subscription {d.name}/{d.multi_id} twice"
        out[(d.name, d.multi_id)] = d.data
    return out


def time_sorted(data: Data) -> Data:
    order = np.argsort(data["timestamp"], kind="stable")
    return {k: v[order] for k, v in data.items()}


def concat(datas: list[Data]) -> Data:
    keys = list(datas[0])
    for d in datas:
        assert list(d) == keys
    return {k: np.concatenate([d[k] for d in datas]) for k in keys}


def assert_data_equal(got: Data, want: Data, what: str) -> None:
    assert sorted(got) == sorted(want), what
    for k in want:
        assert got[k].dtype == want[k].dtype, (what, k)
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{what}: {k}")


def logged(u: ULog) -> list[tuple[int, int, str]]:
    return [(m.timestamp, m.log_level, m.message) for m in u.logged_messages]


def tagged(u: ULog) -> list[tuple[int, int, int, str]]:
    return [
        (tag, m.timestamp, m.log_level, m.message) for tag, ms in u.logged_messages_tagged.items() for m in ms
    ]


def dropouts(u: ULog) -> list[tuple[int, int]]:
    return [(d.timestamp, d.duration) for d in u.dropouts]


def by_time(items: list[Any], key: Any = lambda x: x[0]) -> list[Any]:
    return sorted(items, key=key)


def defaults(u: ULog) -> dict[int, dict[str, Any]]:
    return {bit: dict(u.get_default_parameters(bit)) for bit in (0, 1) if u.get_default_parameters(bit)}


def part_bounds(res: ops.SplitResult) -> list[tuple[float, float]]:
    """The time range (us) of every part: from its first message to the next part's first."""
    starts = [p.start_time // 1000 for p in res.parts]  # type: ignore[operator]
    return [
        (-math.inf if k == 0 else starts[k], starts[k + 1] if k + 1 < len(starts) else math.inf)
        for k in range(len(starts))
    ]


def check_split(src: Path, res: ops.SplitResult) -> list[ULog]:
    """Every part against the original: definitions, timed records by range, all data."""
    orig = ULog(str(src))
    parts = [ULog(p.path) for p in res.parts]
    assert len(parts) >= 2
    bounds = part_bounds(res)
    total_changes = 0
    for k, (u, (lo, hi)) in enumerate(zip(parts, bounds)):
        assert u.msg_info_dict == orig.msg_info_dict
        assert u.msg_info_multiple_dict == orig.msg_info_multiple_dict
        assert defaults(u) == defaults(orig)
        want_params = dict(orig.initial_parameters)
        for ts, name, value in orig.changed_parameters:
            if ts < lo:
                want_params[name] = value
        assert u.initial_parameters == want_params, k
        want_changes = [c for c in orig.changed_parameters if lo <= c[0] < hi]
        assert u.changed_parameters == want_changes, k
        total_changes += len(want_changes)
        assert res.parts[k].parameter_changes == len(want_changes)
        assert dropouts(u) == [d for d in dropouts(orig) if lo <= d[0] < hi], k
        assert res.parts[k].dropouts == len(dropouts(u))
        want_start = orig.start_timestamp if k == 0 else res.parts[k].start_time // 1000  # type: ignore[operator]
        assert u.start_timestamp == want_start
        # logged strings: only those of this part's time span
        first, last = res.parts[k].start_time // 1000, res.parts[k].end_time // 1000  # type: ignore[operator]
        assert all(first <= t <= last for t, _, _ in logged(u))
    assert total_changes == len(orig.changed_parameters)
    # nothing lost, nothing added: every topic's data is the concatenation of the parts'
    want = topics(orig)
    got: dict[tuple[str, int], list[Data]] = {}
    for u in parts:
        for key, d in topics(u).items():
            assert key in want
            got.setdefault(key, []).append(d)
    assert set(got) == {k for k, d in want.items() if len(d["timestamp"])}
    for key, ds in got.items():
        assert_data_equal(concat(ds), time_sorted(want[key]), f"{src.name} {key}")
    assert by_time([x for u in parts for x in logged(u)]) == by_time(logged(orig))
    assert by_time([x for u in parts for x in tagged(u)], key=lambda x: x[1]) == by_time(
        tagged(orig), key=lambda x: x[1]
    )
    return parts


FORMATS = [
    "pos:uint64_t timestamp;float[3] xyz;int32_t k;",
    "att:uint64_t timestamp;float q;uint8_t flag;uint8_t[3] _padding0;",
]


def make_log(
    path: Path,
    *,
    t0: int,
    times: list[int],
    scale: float = 1.0,
    info: dict[str, Any] | None = None,
    params: dict[str, int | float] | None = None,
    changes: list[tuple[int, str, int | float]] = (),  # type: ignore[assignment]
    drops: list[tuple[int, int]] = (),  # type: ignore[assignment]
    strings: list[tuple[int, int, str, int | None]] = (),  # type: ignore[assignment]
    default_params: dict[str, tuple[int | float, int]] | None = None,
    formats: list[str] = FORMATS,
) -> Path:
    """A log with topics pos (instances 0 and 1) and att, rows at ``times`` (us)."""
    with UlogWriter(str(path), start_timestamp=t0) as w:
        for f in formats:
            w.add_format(f)
        for k, v in (info or {"sys_name": "PX4", "ver_hw": "SITL"}).items():
            w.add_info(k, v)
        w.add_info_multiple("perf_counter", ["a: 1 events", "b: 2 events"])
        for k, v in (params or {"P_INT": 3, "P_FLT": 0.5}).items():
            w.add_param(k, v)
        for k, (v, bits) in (default_params or {}).items():
            w.add_default_param(k, v, bits)
        pos0 = w.add_subscription("pos", 0)
        pos1 = w.add_subscription("pos", 1)
        att = w.add_subscription("att")
        for ts, name, value in changes:
            w.change_param(name, value, ts)
        for ts, ms in drops:
            w.add_dropout(ms, ts)
        for ts, level, text, tag in strings:
            w.add_logged_string(level, text, ts, tag)
        t = np.array(times, dtype=np.uint64)
        n = len(t)
        i = np.arange(n)
        pos_cols = {"timestamp": t, "xyz[0]": i * scale, "xyz[1]": -i * scale, "xyz[2]": i * 0.25, "k": i}
        pos1_cols = {"timestamp": t[::2], "xyz[0]": i[::2] + 1000.0, "k": -i[::2]}
        att_cols = {"timestamp": t[1::3], "q": i[1::3] * 0.5 * scale, "flag": (i[1::3] % 2).astype(np.uint8)}
        w.write_columns_many([(pos0, pos_cols), (pos1, pos1_cols), (att, att_cols)])
    return path


GEN_TIMES = list(range(1_000_000, 1_000_000 + 100 * 10_000, 10_000))  # 100 rows, 10 ms apart


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    path = make_log(
        tmp_path / "gen.ulg",
        t0=900_000,
        times=GEN_TIMES,
        changes=[
            (900_000, "P_INT", 4),
            (1_200_000, "P_FLT", 1.5),
            (1_490_000, "P_NEW", 7),
            (1_700_000, "P_INT", 5),
        ],
        drops=[(1_250_000, 40), (1_800_000, 12)],
        strings=[
            (1_100_000, 6, "hello", None),
            (1_550_000, 4, "warn here", None),
            (1_600_000, 6, "tagged", 3),
        ],
        default_params={"P_INT": (1, 1), "P_FLT": (0.25, 2)},
    )
    u = ULog(str(path))  # the generated log itself is what we think it is
    assert u.changed_parameters == [
        (900_000, "P_INT", 4),
        (1_200_000, "P_FLT", 1.5),
        (1_490_000, "P_NEW", 7),
        (1_700_000, "P_INT", 5),
    ]
    assert dropouts(u) == [(1_250_000, 40), (1_800_000, 12)]
    assert defaults(u) == {0: {"P_INT": 1}, 1: {"P_FLT": 0.25}}
    return path


# --- split ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("sample.ulg", {"duration": "20s"}),
        ("sample.ulg", {"size": 400_000}),
        ("sample_logging_tagged_and_default_params.ulg", {"duration": "3s"}),
        ("sample_log_small.ulg", {"at": ["+60s", "+100s"]}),
        ("sample_appended_multiple.ulg", {"duration": "2s"}),
        ("sample_px4_events.ulg", {"size": 300_000}),
        ("sample.ulg", {"size": 60_000}),
    ],
)
def test_split_corpus_parts_keep_extras(tmp_path: Path, name: str, mode: dict[str, Any]) -> None:
    src = ULOG_DIR / name
    res = ops.split(src, output_dir=tmp_path, **mode)
    assert res.dropped_messages == 0 and not res.warnings
    check_split(src, res)
    if "size" in mode:
        assert all(Path(p.path).stat().st_size <= mode["size"] or p.messages == 1 for p in res.parts)


def test_split_sample_places_changes_and_dropouts(tmp_path: Path) -> None:
    res = ops.split(SAMPLE, duration="20s", output_dir=tmp_path)
    parts = check_split(SAMPLE, res)
    # the fixed facts of sample.ulg: every change and dropout is in exactly one part
    assert sum(len(u.changed_parameters) for u in parts) == 6
    assert sum(len(u.dropouts) for u in parts) == 4
    assert sum(len(u.logged_messages) for u in parts) == 4
    # after 158196367 COM_AUTOS_PAR is 0, so a later part starts with 0 (initially 1)
    later = [u for u, p in zip(parts, res.parts) if p.start_time // 1000 > 158196367]  # type: ignore[operator]
    assert later and later[0].initial_parameters["COM_AUTOS_PAR"] == 0
    assert parts[0].initial_parameters["COM_AUTOS_PAR"] == 1


def test_split_generated_rule_at_part_boundaries(tmp_path: Path, generated: Path) -> None:
    # parts start at 1.25 s and 1.5 s; P_NEW changes at 1.49 s, in the gap before part 2's data
    res = ops.split(generated, at=[1_250_000_000, 1_500_000_000], output_dir=tmp_path / "p")
    parts = check_split(generated, res)
    assert len(parts) == 3
    assert [u.changed_parameters for u in parts] == [
        [(900_000, "P_INT", 4), (1_200_000, "P_FLT", 1.5)],
        [(1_490_000, "P_NEW", 7)],
        [(1_700_000, "P_INT", 5)],
    ]
    assert parts[0].initial_parameters == {"P_INT": 3, "P_FLT": 0.5}
    assert parts[1].initial_parameters == {"P_INT": 4, "P_FLT": 1.5}
    assert parts[2].initial_parameters == {"P_INT": 4, "P_FLT": 1.5, "P_NEW": 7}
    # a dropout stamped exactly at a part's first data belongs to that part
    assert [dropouts(u) for u in parts] == [[], [(1_250_000, 40)], [(1_800_000, 12)]]
    assert [logged(u) for u in parts] == [[(1_100_000, 6, "hello")], [], [(1_550_000, 4, "warn here")]]
    assert [tagged(u) for u in parts] == [[], [], [(3, 1_600_000, 6, "tagged")]]
    assert [u.start_timestamp for u in parts] == [900_000, 1_250_000, 1_500_000]
    for u in parts:
        assert defaults(u) == {0: {"P_INT": 1}, 1: {"P_FLT": 0.25}}
        assert u.msg_info_multiple_dict == {"perf_counter": [["a: 1 events", "b: 2 events"]]}
        assert {d.name for d in u.data_list} == {"pos", "att"}


def test_split_ulog_to_mcap_and_bag_parts(tmp_path: Path, generated: Path) -> None:
    res = ops.split(generated, at=[1_250_000_000, 1_500_000_000], output_dir=tmp_path, format="mcap")
    assert len(res.parts) == 3 and res.metadata == 12
    assert any("parameter changes" in w for w in res.warnings)
    want_params = [{"P_INT": "3", "P_FLT": "0.5"}, {"P_INT": "4", "P_FLT": "1.5"}]
    want_params.append({**want_params[1], "P_NEW": "7"})
    total = 0
    for p, params in zip(res.parts, want_params):
        with polybag.open(p.path) as r:
            md = {m.name: dict(m.metadata) for m in r.metadata()}
            total += sum(1 for _ in r.messages())
        assert md["ulog_info"] == {"sys_name": "PX4", "ver_hw": "SITL"}
        assert md["ulog_params"] == params
        assert md["ulog_default_params_0"] == {"P_INT": "1"}
        assert md["ulog_default_params_1"] == {"P_FLT": "0.25"}
    with polybag.open(generated) as r:
        assert total == r.summary.message_count
    # back to ULog: the metadata become the part's info and initial parameters
    back = ops.convert(res.parts[2].path, tmp_path / "back.ulg")
    assert not back.dropped_messages
    u = ULog(str(tmp_path / "back.ulg"))
    assert u.initial_parameters == {"P_INT": 4, "P_FLT": 1.5, "P_NEW": 7}
    assert u.msg_info_dict["sys_name"] == "PX4"
    res_bag = ops.split(generated, duration="0.3s", output_dir=tmp_path / "b", format="bag")
    assert len(res_bag.parts) >= 3 and res_bag.messages == total
    assert any("cannot hold the ULog's info and parameters" in w for w in res_bag.warnings)


def test_split_part_starting_with_a_logged_string(tmp_path: Path) -> None:
    # a change before any data and a logged string before the first row: pyulog must still
    # see the change as a change (records before the first subscription are definitions)
    src = make_log(
        tmp_path / "s.ulg",
        t0=900_000,
        times=GEN_TIMES,
        changes=[(900_000, "P_INT", 8)],
        drops=[(900_000, 5)],
        strings=[(950_000, 6, "boot", None), (1_405_000, 6, "mid", None)],
    )
    res = ops.split(src, at=[1_402_000_000], output_dir=tmp_path / "p")
    parts = check_split(src, res)
    assert parts[0].changed_parameters == [(900_000, "P_INT", 8)]
    assert dropouts(parts[0]) == [(900_000, 5)]
    assert parts[0].initial_parameters["P_INT"] == 3 and parts[1].initial_parameters["P_INT"] == 8
    assert logged(parts[0])[0] == (950_000, 6, "boot") and logged(parts[1]) == [(1_405_000, 6, "mid")]


# --- merge ---------------------------------------------------------------------------------
def test_merge_split_parts_gives_back_the_original(tmp_path: Path) -> None:
    # the part from 160 s starts with COM_AUTOS_PAR 0 (changed at 158.2 s, 1 at first)
    res = ops.split(SAMPLE, at=[130 * 10**9, 160 * 10**9, 175 * 10**9], output_dir=tmp_path / "p")
    assert len(res.parts) == 4
    out = tmp_path / "m.ulg"
    m = ops.merge(out, [p.path for p in res.parts])
    assert m.dropped_messages == 0 and m.messages == res.messages
    assert m.parameter_changes == 6 and m.dropouts == 4
    orig, got = ULog(str(SAMPLE)), ULog(str(out))
    assert got.msg_info_dict == orig.msg_info_dict
    assert got.initial_parameters == orig.initial_parameters  # the first part's (first wins)
    assert got.changed_parameters == orig.changed_parameters
    assert dropouts(got) == dropouts(orig)
    assert logged(got) == by_time(logged(orig))
    assert got.start_timestamp == min(ULog(p.path).start_timestamp for p in res.parts)
    want, have = topics(orig), topics(got)
    assert set(have) == {k for k, d in want.items() if len(d["timestamp"])}
    for key in have:
        assert_data_equal(have[key], time_sorted(want[key]), str(key))
    # later parts' initial parameters differ from the first's: reported
    assert "COM_AUTOS_PAR" in m.param_conflicts
    assert any("parameter(s) differ" in w for w in m.warnings)


def test_merge_generated_logs(tmp_path: Path) -> None:
    a = make_log(
        tmp_path / "a.ulg",
        t0=1_000_000,
        times=GEN_TIMES,
        info={"sys_name": "PX4", "ver_hw": "A"},
        params={"P_INT": 3, "P_FLT": 0.5},
        changes=[(1_300_000, "P_INT", 9)],
        drops=[(1_500_000, 20)],
        strings=[(1_050_000, 6, "a first", None), (1_400_000, 3, "a err", 1)],
        default_params={"P_INT": (1, 1)},
    )
    b_times = [t + 5_000 for t in GEN_TIMES]  # interleaved with a's
    b = make_log(
        tmp_path / "b.ulg",
        t0=800_000,
        times=b_times,
        scale=-2.0,
        info={"sys_name": "PX4", "ver_hw": "B", "only_b": "x"},
        params={"P_INT": 4, "P_B": 1},
        changes=[(1_305_000, "P_B", 2)],
        drops=[(1_005_000, 7)],
        strings=[(1_060_000, 4, "b warn", None)],
        default_params={"P_INT": (2, 1), "P_B": (0, 2)},
    )
    out = tmp_path / "m.ulg"
    res = ops.merge(out, [a, b])
    assert res.dropped_messages == 0
    u = ULog(str(out))
    ua, ub = ULog(str(a)), ULog(str(b))
    assert u.msg_info_dict == {"sys_name": "PX4", "ver_hw": "A", "only_b": "x"}
    assert u.initial_parameters == {"P_INT": 3, "P_FLT": 0.5, "P_B": 1}
    assert res.param_conflicts == ["P_INT"]
    assert any("ver_hw" in w for w in res.warnings) and any("P_INT" in w for w in res.warnings)
    assert defaults(u) == {0: {"P_INT": 1}, 1: {"P_B": 0}}
    assert u.changed_parameters == [(1_300_000, "P_INT", 9), (1_305_000, "P_B", 2)]
    assert dropouts(u) == [(1_005_000, 7), (1_500_000, 20)]
    assert logged(u) == [(1_050_000, 6, "a first"), (1_060_000, 4, "b warn")]
    assert tagged(u) == [(1, 1_400_000, 3, "a err")]
    assert u.start_timestamp == 800_000
    assert u.msg_info_multiple_dict == ua.msg_info_multiple_dict
    # one subscription per (name, instance): the data of both, by time
    have, wa, wb = topics(u), topics(ua), topics(ub)
    assert set(have) == set(wa) == set(wb)
    for key in have:
        assert_data_equal(have[key], time_sorted(concat([wa[key], wb[key]])), str(key))


def test_merge_conflicting_formats_are_reported(tmp_path: Path) -> None:
    a = make_log(tmp_path / "a.ulg", t0=0, times=GEN_TIMES)
    other = ["pos:uint64_t timestamp;double[3] xyz;int32_t k;", FORMATS[1]]
    b = make_log(tmp_path / "b.ulg", t0=0, times=GEN_TIMES, formats=other)
    res = ops.merge(tmp_path / "m.ulg", [a, b])
    assert any("topic pos" in w and "differently" in w for w in res.warnings)
    n_pos_b = len(GEN_TIMES) + len(GEN_TIMES[::2])
    assert res.dropped_messages == n_pos_b
    u = ULog(str(tmp_path / "m.ulg"))
    assert len(topics(u)[("pos", 0)]["timestamp"]) == len(GEN_TIMES)  # a's only
    assert len(topics(u)[("att", 0)]["timestamp"]) == 2 * len(GEN_TIMES[1::3])


def test_merge_ulogs_to_mcap_and_back(tmp_path: Path) -> None:
    out = tmp_path / "m.mcap"
    res = ops.merge(out, [SAMPLE, TAGGED])
    with polybag.open(out) as r:
        md = {m.name: dict(m.metadata) for m in r.metadata()}
    a, b = ULog(str(SAMPLE)), ULog(str(TAGGED))
    assert md["ulog_info"]["ver_sw"] == str(a.msg_info_dict["ver_sw"])
    want = {**{k: v for k, v in b.initial_parameters.items()}, **a.initial_parameters}
    assert set(md["ulog_params"]) == set(want)
    assert all(md["ulog_params"][k] == (repr(v) if isinstance(v, float) else str(v)) for k, v in want.items())
    assert "ulog_default_params_0" in md and "ulog_default_params_1" in md
    assert res.messages == sum(1 for _ in polybag.open(SAMPLE).messages()) + sum(
        1 for _ in polybag.open(TAGGED).messages()
    )
    # ULog + MCAP into ULog: the ULog input's info and parameters win
    mixed = tmp_path / "mixed.ulg"
    ops.convert(TAGGED, tmp_path / "t.mcap")
    r2 = ops.merge(mixed, [SAMPLE, tmp_path / "t.mcap"])
    u = ULog(str(mixed))
    assert u.initial_parameters["COM_AUTOS_PAR"] == a.initial_parameters["COM_AUTOS_PAR"]
    assert u.msg_info_dict["ver_sw"] == a.msg_info_dict["ver_sw"]
    assert u.changed_parameters == a.changed_parameters
    assert r2.messages > len(a.logged_messages)


# --- CLI -------------------------------------------------------------------------------------
def test_cli_split_and_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["split", str(SAMPLE), "--duration", "20s", "-o", str(tmp_path / "p"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    paths = [p["path"] for p in info["parts"]]
    assert len(paths) >= 3
    assert sum(p["parameter_changes"] for p in info["parts"]) == 6
    for p in paths:
        assert ULog(p).msg_info_dict == ULog(str(SAMPLE)).msg_info_dict
    out = tmp_path / "out.ulg"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    u = ULog(str(out))
    assert u.changed_parameters == ULog(str(SAMPLE)).changed_parameters
    assert len(u.logged_messages) == 4
    out2 = tmp_path / "out2.ulg"
    assert main(["merge", str(out2), paths[0], paths[1]]) == 0  # OUT IN... still works
    assert ULog(str(out2)).msg_info_dict == u.msg_info_dict
    assert main(["merge", str(tmp_path / "x.ulg")]) == 2
