"""The one grammar of time arguments (issue 27, "times in seconds"): a bare number is
seconds, units (ns only with ``ns``), ``+T`` from the log start, epoch seconds or ISO 8601,
exact to the nanosecond, and a bad or out-of-range time is a UsageError that lists the forms."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polybag.errors import PolybagError, UsageError
from polybag.selection import (
    MAX_NS,
    TimeWindow,
    duration_ns,
    duration_seconds,
    format_iso,
    format_ns,
    parse_duration,
    parse_time,
    time_ns,
)

S = 1_000_000_000
T0 = 1_764_324_000 * S  # 2025-11-28T10:00:00Z


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("5", 5 * S),
        ("1.5", 1_500_000_000),
        (".25", 250_000_000),
        ("5.", 5 * S),
        ("5s", 5 * S),
        ("5 s", 5 * S),
        ("5sec", 5 * S),
        ("500ms", 500_000_000),
        ("1.5ms", 1_500_000),
        ("10us", 10_000),
        ("10\u00b5s", 10_000),
        ("10\u03bcs", 10_000),
        ("7ns", 7),
        ("1700000000123456789ns", 1_700_000_000_123_456_789),
        ("2m", 120 * S),
        ("2min", 120 * S),
        ("1.5h", 5400 * S),
        ("1d", 86_400 * S),
        ("1e3", 1000 * S),
        ("2.5e-3", 2_500_000),
        ("1700000000.123456789", 1_700_000_000_123_456_789),
        ("1700000000.1234567894", 1_700_000_000_123_456_789),  # rounded to the ns
        ("1700000000.1234567896", 1_700_000_000_123_456_790),
        ("  12  ", 12 * S),
    ],
)
def test_numbers_are_seconds_and_units_scale_them_exactly(text: str, ns: int) -> None:
    assert parse_time(text) == ns
    assert time_ns(text) == ns
    assert duration_ns(text) == ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2025-11-28T10:00:00Z", T0),
        ("2025-11-28T10:00:00", T0),  # no offset: UTC, as polybag prints times
        ("2025-11-28 10:00:00", T0),
        ("2025-11-28T10:00Z", T0),
        ("2025-11-28", T0 - 10 * 3600 * S),
        ("2025-11-28T12:00:00+02:00", T0),
        ("2025-11-28T12:00:00+0200", T0),
        ("2025-11-28T05:30:00-04:30", T0),
        ("2025-11-28T10:00:00.5Z", T0 + S // 2),
        ("2025-11-28T10:00:00,5Z", T0 + S // 2),
        ("2025-11-28T10:00:00.000000001Z", T0 + 1),
        ("2025-11-28T10:00:00.123456789+00:00", T0 + 123_456_789),
        ("1970-01-01T00:00:00Z", 0),
    ],
)
def test_iso_8601_is_exact_to_the_nanosecond(text: str, ns: int) -> None:
    assert parse_time(text) == ns


def test_iso_agrees_with_datetime_where_datetime_is_exact() -> None:
    text = "2026-11-28T10:00:00.123456+01:00"
    want = dt.datetime.fromisoformat(text)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert parse_time(text) == (want - epoch) // dt.timedelta(microseconds=1) * 1000


@pytest.mark.parametrize(("text", "ns"), [("+5", 5 * S), ("+500ms", S // 2), ("+2m", 120 * S), ("+0", 0), ("+ 1.5", 3 * S // 2)])
def test_plus_is_relative_to_the_log_start(text: str, ns: int) -> None:
    assert parse_time(text, T0) == T0 + ns
    calls: list[int] = []

    def start() -> int:
        calls.append(1)
        return T0

    assert time_ns(text, start) == T0 + ns and calls == [1]
    assert time_ns("5", start) == 5 * S and calls == [1]  # an absolute time does not ask for the start


def test_a_relative_time_without_a_start_is_refused() -> None:
    with pytest.raises(UsageError, match="needs a log start"):
        parse_time("+5")


FORMS = ("500ms", "2m", "+T", "ISO 8601")


@pytest.mark.parametrize(
    "text",
    ["abc", "", "5 parsecs", "5S", "nan", "inf", "1e5000000", "--5", "5..5", "1:30", "+2025-11-28", "0x10", "\u0665"],
)
def test_a_bad_time_is_a_usage_error_that_lists_the_forms(text: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_time(text, T0)
    msg = str(e.value)
    assert isinstance(e.value, PolybagError)
    if "too large" not in msg:
        assert repr(text) in msg and all(f in msg for f in FORMS), msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("-5", "negative"),
        ("-0.5s", "negative"),
        ("1969-12-31T23:59:59Z", "before 1970"),
        ("1e20", "too large"),
        ("9223372037", "too large"),
        ("9" * 60, "too large"),
        ("2262-04-11T23:47:17Z", "too large"),
        ("2025-13-01", "month"),
        ("2025-02-30T00:00:00Z", "day"),
        ("2025-11-28T10:00:00+24:00", "offset"),
    ],
)
def test_out_of_range_times_are_refused_not_wrapped(text: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        parse_time(text)


def test_the_largest_time_is_int64_and_one_more_ns_is_refused() -> None:
    assert parse_time(f"{MAX_NS}ns") == MAX_NS
    assert parse_time("9223372036.854775807") == MAX_NS
    with pytest.raises(UsageError, match="too large"):
        parse_time(f"{MAX_NS + 1}ns")
    with pytest.raises(UsageError, match="too large"):
        parse_time("+1ns", MAX_NS)


def test_durations_take_numbers_and_units_not_points_in_time() -> None:
    assert parse_duration("+5") == 5 * S
    assert duration_seconds("500ms") == 0.5 and duration_seconds("2m") == 120.0 and duration_seconds(3) == 3.0
    with pytest.raises(UsageError, match="point in time"):
        parse_duration("2025-11-28T10:00:00Z")
    with pytest.raises(UsageError, match="negative"):
        parse_duration("-5")
    with pytest.raises(UsageError, match="500ms"):
        parse_duration("five")
    with pytest.raises(UsageError, match="too large"):
        parse_duration("1e12")


def test_ints_are_nanoseconds_and_other_types_are_refused() -> None:
    import numpy as np

    assert time_ns(5) == 5 and duration_ns(5) == 5 and time_ns(np.int64(7)) == 7
    for bad in (1.5, True, None, b"5"):
        with pytest.raises(UsageError, match="integer nanoseconds"):
            time_ns(bad)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="integer nanoseconds"):
            duration_ns(bad)  # type: ignore[arg-type]


def test_windows_take_the_grammar_and_refuse_an_end_before_the_start() -> None:
    assert TimeWindow.parse("+5", "+10", T0) == TimeWindow(T0 + 5 * S, T0 + 10 * S)
    assert TimeWindow.parse(None, "2025-11-28T10:00:01Z", T0) == TimeWindow(None, T0 + S)
    asked: list[int] = []
    w = TimeWindow.parse("+1", "+2", lambda: asked.append(1) or T0)
    assert w == TimeWindow(T0 + S, T0 + 2 * S) and asked == [1]  # the start is asked for once
    with pytest.raises(UsageError, match="before the start"):
        TimeWindow.parse("+10", "+5", T0)
    assert TimeWindow.of_ns("2025-11-28T10:00:00Z", T0 + 1) == TimeWindow(T0, T0 + 1)
    with pytest.raises(UsageError, match="relative"):
        TimeWindow.of_ns("+5", None)
    with pytest.raises(UsageError, match="end must be"):
        TimeWindow.of_ns(None, 1.5)


ns_values = st.integers(min_value=0, max_value=MAX_NS)


@given(ns_values)
def test_format_ns_round_trips(ns: int) -> None:
    assert parse_time(format_ns(ns)) == ns
    assert parse_time(format_ns(ns) + "s") == ns
    assert parse_time(f"{ns}ns") == ns


@given(st.integers(min_value=0, max_value=253_402_300_799 * S))  # to 9999-12-31T23:59:59Z
def test_format_iso_round_trips(ns: int) -> None:
    if ns > MAX_NS:
        with pytest.raises(UsageError, match="too large"):
            parse_time(format_iso(ns))
    else:
        assert parse_time(format_iso(ns)) == ns


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from([("ns", 1), ("us", 10**3), ("ms", 10**6), ("s", S), ("m", 60 * S), ("h", 3600 * S)]))
def test_every_unit_scales_integers_exactly(n: int, unit: tuple[str, int]) -> None:
    name, scale = unit
    want = n * scale
    if want > MAX_NS:
        with pytest.raises(UsageError, match="too large"):
            parse_time(f"{n}{name}")
    else:
        assert parse_time(f"{n}{name}") == want
        assert parse_time(f"+{n}{name}", 0) == want
        assert parse_duration(f"{n}{name}") == want


@given(st.integers(min_value=0, max_value=10**9 - 1), st.integers(min_value=0, max_value=10**9))
def test_decimal_seconds_are_exact(frac: int, secs: int) -> None:
    assert parse_time(f"{secs}.{frac:09d}") == secs * S + frac
    assert parse_time(f"{secs * 1000 + frac // 10**6}.{frac % 10**6:06d}ms") == secs * S + frac


def test_a_bare_number_before_a_recent_log_warns_but_not_on_a_boot_time_log() -> None:
    import warnings

    from polybag.errors import PolybagWarning

    with pytest.warns(PolybagWarning, match=r"start '5' is 1970-01-01T00:00:05Z .* is '\+5'"):
        assert TimeWindow.parse("5", None, T0) == TimeWindow(5 * S, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TimeWindow.parse("5", "20", 3 * S) == TimeWindow(5 * S, 20 * S)  # a ULog: times from boot
        assert TimeWindow.parse("+5", "2025-11-28T10:00:06Z", T0).start == T0 + 5 * S
        assert TimeWindow.parse(f"{T0}ns", None, T0).start == T0
