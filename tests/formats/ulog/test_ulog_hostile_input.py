"""Issue 12 (trust), ULog leftovers found by the fuzzer and by trying the CLI on damaged logs.

* Encoding an object that does not fit the format (a decoded message changed by hand, a
  string where an array belongs, a field named like a Python attribute) is a
  :class:`DecodeError`, never a ``TypeError``/``KeyError`` from inside the codec.
* Names cannot make a format cost memory in proportion to what it declares: a name longer
  than ``MAX_NAME`` is refused, and so is a format whose flattened names would add up to
  more than ``MAX_FLAT_NAME_CHARS`` characters (a long name times a large array).
* A data message whose subscription is unusable and whose msg_id is subscribed again later
  is counted and dropped (the ``_count_subs`` reproducer).
* ``export`` of a damaged ULog writes every row before the damage, reports it and exits 1
  (it used to write the rows silently and exit 0); ``check`` lists every damaged place, not
  just the first.
"""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.codecs.ulog import (
    MAX_NAME,
    compile_type,
    parse_format,
)
from polybag.errors import DecodeError, FormatError, PolybagError
from ulog_helpers import POS_FMT, data, flags, fmt, header, pos_payload, sub, synthetic_log, write

ROOT = Path(__file__).resolve().parents[3]


def _pos_type() -> object:
    f = parse_format(POS_FMT)
    return compile_type("pos", {"pos": f})


# --- encoding what does not fit ----------------------------------------------------------------
@pytest.mark.parametrize(
    "obj",
    [
        {"timestamp": 1, "xyz": "abc", "k": 1},  # a string for a float array
        {"timestamp": 1, "xyz": {"a": 1}, "k": 1},  # a mapping for an array
        {"timestamp": 1, "xyz": 5, "k": 1},  # a number for an array
        {"timestamp": "now", "xyz": [1, 2, 3], "k": 1},  # a string for an integer
        {"timestamp": 1, "xyz": [1, 2, 3], "k": 1 << 40},  # out of int16 range
        {"timestamp": -1, "xyz": [1, 2, 3], "k": 1},  # negative for uint64
        {"timestamp": 1, "xyz": [object(), 2, 3], "k": 1},
    ],
    ids=["str-array", "dict-array", "int-array", "str-int", "overflow", "negative", "object"],
)
def test_encode_of_a_value_that_does_not_fit_is_a_decode_error(obj: dict) -> None:
    t = _pos_type()
    with pytest.raises(DecodeError, match="cannot encode"):
        t.encode(obj)  # type: ignore[attr-defined]


def test_encode_after_decode_round_trips_and_a_changed_message_is_checked() -> None:
    t = _pos_type()
    payload = pos_payload(123, 4)
    d = t.to_dict(payload)  # type: ignore[attr-defined]
    assert t.encode(d)[: len(payload)] == payload  # type: ignore[attr-defined]
    d["xyz"] = None  # left out: zeros
    out = t.encode(d)  # type: ignore[attr-defined]
    assert struct.unpack_from("<3f", out, 8) == (0.0, 0.0, 0.0)
    d["xyz"] = ["x", "y", "z"]
    with pytest.raises(DecodeError):
        t.encode(d)  # type: ignore[attr-defined]


def test_a_field_named_like_a_python_attribute_is_the_field() -> None:
    f = parse_format("odd:uint64_t timestamp;int32_t __class__;int32_t __dict__;")
    t = compile_type("odd", {"odd": f})

    class Obj:
        def __init__(self) -> None:
            self.timestamp = 5

    out = t.encode(Obj())  # the missing fields are zeros, not the object's class or namespace
    assert out == struct.pack("<Qii", 5, 0, 0)
    d = t.to_dict(struct.pack("<Qii", 5, 7, 8))
    assert d["__class__"] == 7 and d["__dict__"] == 8
    assert t.encode(d) == struct.pack("<Qii", 5, 7, 8)


def test_every_fuzz_reproducer_of_the_ulog_codec_replays_cleanly() -> None:
    """The reproducers the fuzzer saved for the ULog targets are in fuzz/repros/ and pass
    (tests/safety/test_fuzz.py replays each in a fresh process; here they are counted)."""
    names = sorted(p.name for p in (ROOT / "fuzz" / "repros").glob("ulog*.bin"))
    assert any(n.startswith("ulog_decoder-TypeError") for n in names)
    assert "ulog-ValueError-count_subs.bin" in names
    assert "ulog_decoder-MemoryError-compile_type.bin" in names


# --- names that would cost memory -------------------------------------------------------------
def test_a_name_longer_than_the_cap_is_refused() -> None:
    long = "n" * (MAX_NAME + 1)
    with pytest.raises(ValueError, match="characters"):
        parse_format(f"{long}:uint64_t timestamp;")
    with pytest.raises(ValueError, match="longer than"):
        parse_format(f"t:uint64_t timestamp;float {long};")
    ok = parse_format(f"t:uint64_t timestamp;float {'n' * MAX_NAME};")
    assert ok.fields[1].name == "n" * MAX_NAME


def test_long_names_times_a_large_array_are_refused_before_anything_is_built() -> None:
    """Fifteen levels of ``level_i[2] <255-character name>``: 32,768 flattened fields (under
    the field cap) whose names would add up to over 120 million characters; the format is
    refused from its arithmetic, before a name is built."""
    name = "x" * MAX_NAME
    formats = {"l0": parse_format(f"l0:float {name};")}
    for i in range(1, 16):
        formats[f"l{i}"] = parse_format(f"l{i}:l{i - 1}[2] {name};")
    with pytest.raises(ValueError, match="characters of flattened field names"):
        compile_type("l15", formats)
    assert compile_type("l3", formats).name == "l3"  # a small one of the same shape is fine


def test_a_log_with_such_a_format_reads_its_other_topics(tmp_path: Path) -> None:
    name = "y" * MAX_NAME
    levels = [fmt(f"l0:float {name};")] + [fmt(f"l{i}:l{i - 1}[2] {name};") for i in range(1, 15)]
    hog = fmt(f"hog:uint64_t timestamp;l14[2] {name};")
    content = b"".join(
        [header(), flags(), fmt(POS_FMT), *levels, hog, sub(0, 0, "pos"), sub(0, 1, "hog")]
        + [data(0, pos_payload(1_000_000 + i, i)) for i in range(20)]
    )
    path = write(tmp_path, "hog.ulg", content)
    got = []
    with pytest.raises(FormatError, match="characters of flattened field names"):
        with polybag.open(path) as r:  # strict: the intact messages before it, then the damage
            got.extend(m.channel.topic for m in r.messages())
    assert got == []  # the damage (the subscription) lies before every data message
    with polybag.open(path, recover=True) as r:
        got = [m.channel.topic for m in r.messages()]
        errors = r.recovery_report["errors"]
    assert got == ["pos"] * 20
    assert len(errors) == 1 and "no usable format" in errors[0]


# --- a data message of a dead subscription, the msg_id subscribed again ----------------------
def test_a_data_message_of_a_dead_subscription_is_dropped_and_counted(tmp_path: Path) -> None:
    repro = ROOT / "fuzz" / "repros" / "ulog-ValueError-count_subs.bin"
    path = tmp_path / "r.ulg"
    path.write_bytes(repro.read_bytes())
    for recover in (False, True):
        try:
            with polybag.open(str(path), recover=recover) as r:
                for _ in r.messages():
                    pass
        except PolybagError:
            pass  # damage is allowed to be an error; a ValueError from numpy is not


# --- export and check of damaged logs -----------------------------------------------------------
def _damaged(tmp_path: Path, spots: int = 1) -> tuple[str, int]:
    """The synthetic log with ``spots`` data messages' headers overwritten by junk; returns
    the path and the number of ``pos`` instance-0 messages before the first damage."""
    content, spans = synthetic_log(200)
    b = bytearray(content)
    pos0 = [s for s in spans if s[2] == 0]
    hits = [pos0[40 + 50 * k] for k in range(spots)]
    for start, _end, _ in hits:
        b[start : start + 3] = b"\xff\xff\xff"  # size 65535, type 0xff: an invalid header
    return write(tmp_path, f"dam{spots}.ulg", bytes(b)), 40


@pytest.mark.parametrize("fmt_", ["csv", "jsonl"])
def test_export_of_a_damaged_ulog_writes_the_rows_before_it_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt_: str
) -> None:
    path, before = _damaged(tmp_path)
    out = tmp_path / f"out-{fmt_}"
    rc = main(["export", path, "-o", str(out), "--format", fmt_])
    err = capsys.readouterr().err
    assert rc == 1
    assert "the input is damaged" in err and "invalid message header" in err
    table = out / f"pos_0.{fmt_}"
    assert table.is_file(), sorted(p.name for p in out.iterdir())
    if fmt_ == "csv":
        with table.open() as fh:
            rows = list(csv.DictReader(fh))
    else:
        rows = [json.loads(line) for line in table.read_text().splitlines()]
    # issue 27: the ULog is read recovering, so the rows after the damage are kept too
    assert len(rows) > before
    with pytest.raises(FormatError):
        with polybag.open(path) as r:
            for _ in r.messages():
                pass


def test_export_result_counts_the_damaged_tables(tmp_path: Path) -> None:
    path, before = _damaged(tmp_path)
    res = ops.export(path, str(tmp_path / "t"), format="csv")
    assert res.damaged >= 1 and res.failed == 0
    # issue 27: every intact row is exported (the ULog is read recovering); the damage is named
    rows = {t.table: t.rows for t in res.tables}
    assert rows["pos_0"] > before
    assert any("the input is damaged" in w and "invalid message header" in w for w in res.warnings)


def test_export_of_an_intact_ulog_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, _ = synthetic_log(50)
    path = write(tmp_path, "ok.ulg", content)
    assert main(["export", path, "-o", str(tmp_path / "o")]) == 0
    assert "damaged" not in capsys.readouterr().err


def test_check_lists_every_damaged_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _damaged(tmp_path, spots=3)
    rc = main(["check", "--json", path])
    res = json.loads(capsys.readouterr().out)[0]
    assert rc == 1
    msgs = [p["message"] for p in res["problems"]]
    assert len(msgs) == 3, msgs
    offsets = sorted(p["offset"] for p in res["problems"])
    assert len(set(offsets)) == 3
    assert any("recovery mode reads" in n for n in res["notes"])


def test_check_of_one_damaged_place_reports_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _damaged(tmp_path, spots=1)
    assert main(["check", "--json", path]) == 1
    res = json.loads(capsys.readouterr().out)[0]
    assert len(res["problems"]) == 1
    assert "invalid message header" in res["problems"][0]["message"]
