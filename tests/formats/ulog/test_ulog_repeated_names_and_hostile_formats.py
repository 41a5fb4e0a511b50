"""Issue 12 (trust), ULog side: repeated field names, hostile formats, polybag warnings.

* A format that repeats a name (two ``_padding0``, as PX4 formats with several padding gaps
  have, or a real name twice) is read in full, on every path, with the repeats addressed as
  ``name``, ``name_1``... (a suffix that is another field's name is skipped).  pyulog reads
  such a format only when the repeat is trailing padding: there it is compared directly;
  otherwise with pyulog reading the same bytes under a format whose names are made
  distinct by hand.
* Hostile formats (cycles, 5,000-deep chains, absurd arrays, odd names, sizes that do not
  match) give polybag errors or one damage report for the topic, never a traceback, and
  cost no memory in proportion to what they declare.
* ULog warnings are :class:`polybag.PolybagWarning` and the CLI prints them as one line.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polybag
from polybag import ops
from polybag.cli import main
from polybag.codecs.ulog import MAX_DEPTH, codec_for_schema, compile_type, parse_format, type_for_schema
from polybag.errors import FormatError, PolybagError, PolybagWarning, UnsupportedError, WriteError
from polybag.formats.ulog import batches as ulog_batches
from polybag.formats.ulog import reader as ulog_reader
from polybag.formats.ulog.writer import UlogWriter
from polybag.model import Channel, Schema
from ulog_helpers import POS_FMT, TRAIL_FMT, data, flags, fmt, header, msg, pos_payload, sub, write

pyulog = pytest.importorskip("pyulog")

JUNK = 0xAA  # padding bytes hold this: a shifted offset would show

# --- formats with repeated names ----------------------------------------------------------
# two padding gaps named alike in the middle (pyulog cannot build its dtype)
PAD2 = "pad2:uint64_t timestamp;uint8_t a;uint8_t[3] _padding0;float b;uint16_t c;uint8_t[6] _padding0;double d;"
PAD2_DISTINCT = PAD2.replace("uint8_t[6] _padding0", "uint8_t[6] _padding1")
# the repeat is trailing padding (left out of the data, as PX4 does): pyulog reads it
TRAIL = TRAIL_FMT
# a real name four times, with a field really named x_1: the repeats are x_2, x_3
REAL = "real:uint64_t timestamp;float x;int16_t y;int16_t x;float[2] x;uint8_t x_1;"
REAL_DISTINCT = "real:uint64_t timestamp;float x;int16_t y;int16_t x_2;float[2] x_3;uint8_t x_1;"
# a nested type with repeated padding, used as an array
INNER = "inner:float a;uint8_t[1] _padding0;uint8_t b;uint8_t[2] _padding0;"
INNER_DISTINCT = "inner:float a;uint8_t[1] _padding0;uint8_t b;uint8_t[2] _padding1;"
NEST = "nest:uint64_t timestamp;inner[2] items;uint16_t k;uint8_t[6] _padding0;"


def pad2_payload(ts: int, i: int) -> bytes:
    j = bytes([JUNK])
    return struct.pack("<QB3sfH6sd", ts, i % 256, j * 3, i * 0.5, (i * 3) % 65536, j * 6, i * 0.25)


def trail_payload(ts: int, i: int) -> bytes:  # trailing padding left out
    return struct.pack("<QB3sfH", ts, i % 256, bytes([JUNK]) * 3, -i * 1.5, i % 65536)


def real_payload(ts: int, i: int) -> bytes:
    return struct.pack("<QfhhffB", ts, i * 0.5, -i, i * 2, i + 0.25, -i - 0.75, i % 256)


def nest_payload(ts: int, i: int) -> bytes:
    inner = [struct.pack("<fB", k + i * 0.5, (i + k) % 256) for k in range(2)]
    items = b"".join(x[:4] + bytes([JUNK]) + x[4:] + bytes([JUNK]) * 2 for x in inner)
    return struct.pack("<Q", ts) + items + struct.pack("<H", i % 65536)


def dup_log(n: int = 120, *, distinct: bool = False) -> bytes:
    """Topics pad2, real, nest and pos (msg_id 0..3); ``distinct``: the same bytes under
    formats whose names are made distinct by hand (what pyulog can read)."""
    formats = [PAD2_DISTINCT, REAL_DISTINCT, INNER_DISTINCT] if distinct else [PAD2, REAL, INNER]
    out = [header(), flags(), *(fmt(f) for f in formats), fmt(NEST), fmt(POS_FMT)]
    out += [sub(0, 0, "pad2"), sub(0, 1, "real"), sub(0, 2, "nest"), sub(0, 3, "pos")]
    for i in range(n):
        ts = 1_000_000 + i * 1000
        out += [data(0, pad2_payload(ts, i)), data(1, real_payload(ts + 1, i))]
        out += [data(2, nest_payload(ts + 2, i)), data(3, pos_payload(ts + 3, i))]
    return b"".join(out)


def trail_log(n: int = 120) -> bytes:
    out = [header(), flags(), fmt(TRAIL), fmt(POS_FMT), sub(0, 0, "trail"), sub(1, 1, "pos")]
    for i in range(n):
        out += [data(0, trail_payload(1000 + i, i)), data(1, pos_payload(1000 + i, i))]
    return b"".join(out)


def _pyulog(path: str) -> dict[str, dict[str, np.ndarray]]:
    u = pyulog.ULog(path)
    return {d.name: d.data for d in u.data_list}


def _real(name: str) -> bool:
    return "_padding" not in name


# --- repeated names: the same data as pyulog ------------------------------------------------
def test_trailing_repeated_padding_reads_like_pyulog(tmp_path: Path) -> None:
    path = write(tmp_path, "trail.ulg", trail_log())
    want = _pyulog(path)
    assert set(want) == {"trail", "pos"} and len(want["trail"]["timestamp"]) == 120
    with polybag.open(path) as r:
        assert not r.ulog.corruptions
        assert {c.topic for c in r.summary.channels.values()} == {"trail", "pos"}
        for topic, cols in want.items():
            mid = 1 if topic == "pos" else 0
            got = r.topic_columns(topic, mid, padding=True)
            assert set(got) == set(cols)  # pyulog keeps the middle padding columns too
            for k, v in cols.items():
                assert np.array_equal(got[k], v), k
            assert r.summary.message_counts[r._data.subscription(topic, mid).index] == len(cols["timestamp"])
        assert set(r.topic_columns("trail")) == {"timestamp", "a", "b", "c"}


def test_repeated_names_read_like_pyulog_with_distinct_names(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.ulg", dup_log())
    ref = write(tmp_path, "distinct.ulg", dup_log(distinct=True))
    want = _pyulog(ref)
    assert set(want) == {"pad2", "real", "nest", "pos"}
    with polybag.open(path) as r:
        assert not r.ulog.corruptions and not r.ulog.warnings
        assert {c.topic for c in r.summary.channels.values()} == set(want)
        assert r.summary.message_count == 4 * 120
        for topic, cols in want.items():
            got = r.topic_columns(topic)
            assert set(got) == {k for k in cols if _real(k)}
            for k in got:
                assert np.array_equal(got[k], cols[k]), (topic, k)
        # the repeats are there, named by the rule, holding their own bytes
        assert set(r.topic_columns("real")) == {"timestamp", "x", "y", "x_2", "x_3[0]", "x_3[1]", "x_1"}
        pad = r.topic_columns("pad2", padding=True)
        assert [k for k in pad if not _real(k)] == [f"_padding0[{i}]" for i in range(3)] + [
            f"_padding0_1[{i}]" for i in range(6)
        ]
        assert all((pad[k] == JUNK).all() for k in pad if not _real(k))
        nest = r.topic_columns("nest", padding=True)
        assert "items[1]._padding0_1[1]" in nest and (nest["items[1]._padding0_1[1]"] == JUNK).all()


def test_pyulog_itself_cannot_read_the_middle_repeats(tmp_path: Path) -> None:
    """Why the comparison above uses hand-made distinct names: pyulog drops these topics."""
    path = write(tmp_path, "dup.ulg", dup_log())
    assert set(_pyulog(path)) == {"pos"}


def test_repeated_names_in_messages_decode_and_to_dict(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.ulg", dup_log(30))
    with polybag.open(path) as r:
        seen: dict[str, int] = {}
        for m in r.messages():
            i = seen.get(m.channel.topic, 0)
            seen[m.channel.topic] = i + 1
            d = m.decode()
            if m.channel.topic == "real":
                assert (d.x, d.y, d.x_2, d.x_3, d.x_1) == (i * 0.5, -i, i * 2, [i + 0.25, -i - 0.75], i % 256)
            elif m.channel.topic == "pad2":
                assert vars(d) == {"timestamp": 1_000_000 + i * 1000, "a": i, "b": i * 0.5, "c": i * 3, "d": i * 0.25}
            elif m.channel.topic == "nest":
                codec = codec_for_schema(m.channel.schema)  # type: ignore[arg-type]
                got = codec.to_dict(m.data)
                assert got["items"] == [{"a": k + i * 0.5, "b": (i + k) % 256} for k in range(2)]
                assert got["k"] == i
        assert seen == {"pad2": 30, "real": 30, "nest": 30, "pos": 30}
        # encode takes the same names back and gives the same bytes
        ch = next(c for c in r.summary.channels.values() if c.topic == "real")
        codec = codec_for_schema(ch.schema)  # type: ignore[arg-type]
        values = {"timestamp": 1_000_007, "x": 3.5, "y": -7, "x_2": 14, "x_3": [7.25, -7.75], "x_1": 7}
        assert codec.encode(values) == real_payload(1_000_007, 7)


def test_fast_scan_treats_repeated_names_like_any_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan takes its bulk path on the same chunks whether names repeat or not (it used
    to fall off it for every chunk holding such a topic's data)."""
    monkeypatch.setattr(ulog_reader, "_WALK_LIMIT", 256)
    calls: dict[str, list[bool]] = {}
    orig = ulog_batches.BatchDecoder.fast_batch

    def counted(self: Any, p: Any, w: Any) -> bool:
        ok = orig(self, p, w)
        calls.setdefault(self.path or "", []).append(ok)
        return ok

    monkeypatch.setattr(ulog_batches.BatchDecoder, "fast_batch", counted)
    for topics in (None, ["real"]):
        calls.clear()
        a = ulog_reader.UlogReader(polybag.io.source.MappedSource("dup", dup_log(2000)), "dup", topics=topics)
        b = ulog_reader.UlogReader(
            polybag.io.source.MappedSource("distinct", dup_log(2000, distinct=True)), "distinct", topics=topics
        )
        assert calls["dup"] == calls["distinct"]
        assert sum(calls["dup"]) >= len(calls["dup"]) - 2  # all but the chunks with subscriptions
        assert not a.ulog.corruptions
        assert np.array_equal(a.topic_columns("real")["x_2"], b.topic_columns("real")["x_2"])


def test_cli_cat_check_convert_read_every_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "dup.ulg", dup_log(50))
    assert main(["cat", "--json", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 200
    first_real = next(json.loads(x) for x in lines if json.loads(x)["topic"] == "real")
    assert set(first_real["message"]) == {"timestamp", "x", "y", "x_2", "x_3", "x_1"}
    assert main(["check", path]) == 0
    for ext in ("mcap", "bag", "ulg"):
        assert main(["convert", path, str(tmp_path / f"out.{ext}")]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err and "error" not in err


@pytest.mark.parametrize("ext", ["mcap", "bag"])
def test_convert_to_ros1_gives_valid_distinct_names(tmp_path: Path, ext: str) -> None:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    path = write(tmp_path, "dup.ulg", dup_log(40))
    out = tmp_path / f"out.{ext}"
    res = ops.convert(path, out)
    assert res.messages == 160 and not res.warnings
    with polybag.open(out) as r:
        chans = {c.topic: c for c in r.summary.channels.values()}
        assert set(chans) == {"/pad2", "/real", "/nest", "/pos"}
        text = bytes(chans["/real"].schema.data).decode()  # type: ignore[union-attr]
        assert [ln.split()[1] for ln in text.strip().splitlines()] == ["timestamp", "x", "y", "x_2", "x_3", "x_1"]
        nest_def = bytes(chans["/nest"].schema.data).decode()  # type: ignore[union-attr]
        assert "_padding" not in nest_def
        # an independent ROS 1 implementation reads the definitions and payloads
        ts = get_typestore(Stores.EMPTY)
        for topic in ("/real", "/nest"):
            sch = chans[topic].schema
            assert sch is not None
            pkg, name = sch.name.split("/")
            ts.register(get_types_from_msg(bytes(sch.data).decode(), f"{pkg}/msg/{name}"))
        i = 0
        for m in r.messages(topics=["/real", "/nest"], order="file"):
            sch = m.channel.schema
            assert sch is not None
            pkg, name = sch.name.split("/")
            d = ts.deserialize_ros1(bytes(m.data), f"{pkg}/msg/{name}")
            if m.channel.topic == "/real":
                assert (d.x, d.y, d.x_2, list(d.x_3), d.x_1) == (i * 0.5, -i, i * 2, [i + 0.25, -i - 0.75], i % 256)
                assert m.decode().x_2 == i * 2  # and polybag's own decoder
            else:
                assert [(it.a, it.b) for it in d.items] == [(k + i * 0.5, (i + k) % 256) for k in range(2)]
                i += 1


def test_ulog_round_trips_keep_repeated_names(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.ulg", dup_log(40))
    # ULog -> ULog keeps the formats as written
    out = tmp_path / "copy.ulg"
    ops.convert(path, out)
    with polybag.open(path) as a, polybag.open(out) as b:
        assert b.ulog.formats["real"].text() == REAL and b.ulog.formats["inner"].text() == INNER
        for t in ("pad2", "real", "nest", "pos"):
            x, y = a.topic_columns(t, padding=True), b.topic_columns(t, padding=True)
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    # ULog -> MCAP (ROS 1) -> ULog: the repeats come back as distinct fields, same values
    mc = tmp_path / "via.mcap"
    back = tmp_path / "back.ulg"
    ops.convert(path, mc)
    ops.convert(mc, back)
    with polybag.open(path) as a, polybag.open(back) as b:
        x, y = a.topic_columns("real"), b.topic_columns("real")
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    # the writer's columns API with the repeated names
    cols = {"timestamp": np.arange(5, dtype=np.uint64) + 10, "x": np.full(5, 1.5), "x_2": np.arange(5)}
    cols["x_3[1]"] = np.full(5, -2.0)
    w_path = tmp_path / "cols.ulg"
    with UlogWriter(w_path) as w:
        w.add_format(REAL)
        w.write_columns("real", cols)
    with polybag.open(w_path) as r:
        got = r.topic_columns("real")
        for k, v in cols.items():
            assert np.array_equal(got[k], v), k
        assert (got["x_3[0]"] == 0).all() and (got["x_1"] == 0).all()
    assert list(_pyulog(str(w_path))) == []  # (pyulog cannot read this format at all)


# --- an undecodable topic: one report with the count -----------------------------------------
def _evil_log(formats: list[bytes], evil_payload: bytes, n: int = 3000) -> bytes:
    """A log with the topic 'evil' (msg_id 0, formats given as raw F message bodies) and
    'pos' (msg_id 1), ``n`` data messages each, interleaved."""
    out = [header(), flags(), *(msg("F", f) for f in formats), fmt(POS_FMT)]
    out += [sub(0, 0, "evil"), sub(0, 1, "pos")]
    for i in range(n):
        out += [data(0, evil_payload), data(1, pos_payload(1000 + i, i))]
    return b"".join(out)


def test_recover_reports_an_undecodable_topic_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "bad.ulg", _evil_log([b"evil:uint64_t timestamp;evil me;"], bytes(16)))
    assert main(["recover", path, str(tmp_path / "out.ulg")]) == 1
    out, err = capsys.readouterr()
    damage = [ln for ln in out.splitlines() if "damage:" in ln]
    assert len(damage) == 1
    assert "'evil'" in damage[0] and "contains itself" in damage[0] and "3000 data message" in damage[0]
    assert "Traceback" not in err and len(err.splitlines()) <= 2
    with polybag.open(tmp_path / "out.ulg") as r:
        assert r.summary.message_count == 3000
        assert list(r.topic_columns("pos")["timestamp"]) == list(range(1000, 4000))
    r = polybag.open(path, recover=True)
    assert len(r.recovery_report["errors"]) == 1 and len(r.ulog.corruptions) == 1
    assert r.recovery_report["bytes_skipped"] == 3000 * (16 + 5)


def test_wrong_sized_data_of_a_topic_is_one_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every data message 4 bytes longer than its format: dropped where it is (like pyulog),
    one line of the report for the topic (the structured list keeps each)."""
    path = write(tmp_path, "size.ulg", _evil_log([b"evil:uint64_t timestamp;float x;"], bytes(16)))
    r = polybag.open(path, recover=True)
    assert r.summary.message_count == 3000
    (line,) = r.recovery_report["errors"]
    assert "has 16 bytes, expected 12..12" in line and "3000 in all" in line
    assert len(r.ulog.corruptions) + r.ulog.unreported_damage == 3000
    with pytest.raises(FormatError, match="expected 12..12"):
        list(polybag.open(path).messages())
    assert main(["recover", path, str(tmp_path / "out.ulg")]) == 1
    assert sum("damage:" in ln for ln in capsys.readouterr().out.splitlines()) == 1


# --- hostile formats ---------------------------------------------------------------------------
def _chain(depth: int) -> list[bytes]:
    out = [b"evil:uint64_t timestamp;t1 x;"]
    out += [f"t{k}:t{k + 1} x;".encode() for k in range(1, depth)]
    return out + [f"t{depth}:uint8_t v;".encode()]


HOSTILE: dict[str, tuple[list[bytes], str]] = {
    "self": ([b"evil:uint64_t timestamp;evil me;"], "contains itself"),
    "cycle": ([b"evil:uint64_t timestamp;b x;", b"b:c y;", b"c:evil z;"], "contains itself"),
    "deep 5000": (_chain(5000), "deep"),
    "absurd array": ([b"evil:uint64_t timestamp;float[4294967295] x;"], "no format"),
    "huge digits": ([b"evil:uint64_t timestamp;float[" + b"9" * 5000 + b"] x;"], "no format"),
    "array of arrays": ([b"big:float[65535] x;", b"evil:uint64_t timestamp;big[65535] y;"], "fields"),
    "empty items": ([b"e:", b"m:e[65535] a;", b"evil:uint64_t timestamp;m[65535] b;"], "fields"),
    "larger than a message": ([b"evil:uint64_t timestamp;double[9000] x;"], "more than a ULog data message"),
    "unknown type": ([b"evil:uint64_t timestamp;nothing x;"], "no format for type 'nothing'"),
    "no utf-8 name": ([b"evil:uint64_t timestamp;int32_t \xff\xfe;"], "no format"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_format_skips_its_topic(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    formats, why = HOSTILE[case]
    path = write(tmp_path, "evil.ulg", _evil_log(formats, bytes(16), n=500))
    # the library: a polybag error when strict, the topic skipped (one report) with recover
    r = polybag.open(path)
    with pytest.raises(FormatError, match="evil"):
        list(r.messages())
    rr = polybag.open(path, recover=True)
    assert [c.topic for c in rr.summary.channels.values()] == ["pos"]
    assert sum(1 for _ in rr.messages()) == 500
    assert list(rr.topic_columns("pos")["timestamp"]) == list(range(1000, 1500))
    evil = [e for e in rr.recovery_report["errors"] if "'evil'" in e]
    assert len(evil) == 1 and why in evil[0] and "500 data message" in evil[0]
    with pytest.raises(ulog_reader.TopicNotFoundError):
        rr.topic_columns("evil")
    # the CLI: errors and reports, never a traceback
    assert main(["cat", "--json", path]) == 3
    assert main(["check", path]) == 1
    assert main(["info", path]) in (0, 1, 3)
    assert main(["recover", path, str(tmp_path / "out.ulg")]) == 1
    # issue 27: a writing command keeps every intact message and names the damage (exit 1);
    # --strict refuses the damaged input
    assert main(["convert", path, str(tmp_path / "out.mcap")]) == 1
    assert main(["convert", "--strict", path, str(tmp_path / "strict.mcap")]) == 3
    assert not (tmp_path / "strict.mcap").exists()
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "polybag cat: error:" in err


@pytest.mark.parametrize(
    "name",
    ["class", "None", "__class__", "__dict__", "__init__", "__slots__", "_pb_fill", "__msgtype__", "a.b", "x[0]"],
)
def test_odd_names_decode(tmp_path: Path, name: str) -> None:
    """Names that are Python keywords, dunders or hold ``.``/``[]`` read as data everywhere."""
    text = f"odd:uint64_t timestamp;int32_t {name};float[1] x;int16_t {name};"
    payload = struct.pack("<Qifh", 77, -5, 2.5, 9)
    b = header() + flags() + fmt(text) + sub(0, 0, "odd") + data(0, payload)
    path = write(tmp_path, "odd.ulg", b)
    with polybag.open(path) as r:
        assert not r.ulog.corruptions
        (m,) = list(r.messages())
        d = m.decode()
        assert vars(d) == {"timestamp": 77, name: -5, "x": [2.5], f"{name}_1": 9}
        cols = r.topic_columns("odd")
        assert len(cols) == 4 and len(set(cols)) == 4
        assert int(cols["timestamp"][0]) == 77 and int(cols[name][0]) == -5 and int(cols[f"{name}_1"][0]) == 9
    assert main(["cat", "--json", path]) == 0
    res = ops.convert(path, tmp_path / "odd.bag")
    assert res.messages == 1 and not res.warnings
    with polybag.open(tmp_path / "odd.bag") as r:
        ch = next(iter(r.summary.channels.values()))
        names = [ln.split()[1] for ln in bytes(ch.schema.data).decode().strip().splitlines()]  # type: ignore[union-attr]
        assert len(set(names)) == 4
        assert all(n[0].isalpha() and n.replace("_", "a").isalnum() for n in names)


def test_non_utf8_bytes_in_names(tmp_path: Path) -> None:
    """Bytes that are no UTF-8 are dropped from names (as pyulog does); names that then
    repeat are told apart; a name left empty makes the format unusable (one report)."""
    b = header() + flags() + msg("F", b"nu\xff:uint64_t timestamp;int32_t a\xff;int32_t a;")
    b += msg("A", struct.pack("<BH", 0, 0) + b"nu\xff") + data(0, struct.pack("<Qii", 5, 1, 2))
    path = write(tmp_path, "nu.ulg", b)
    with polybag.open(path) as r:
        (m,) = list(r.messages())
        assert m.channel.topic == "nu" and vars(m.decode()) == {"timestamp": 5, "a": 1, "a_1": 2}
    assert main(["cat", "--json", path]) == 0
    # a name of nothing but such bytes: that topic is skipped with one report
    evil = write(tmp_path, "evil.ulg", _evil_log(HOSTILE["no utf-8 name"][0], bytes(12), n=10))
    r = polybag.open(evil, recover=True)
    assert sum(1 for _ in r.messages()) == 10
    assert sum("'evil'" in e for e in r.recovery_report["errors"]) == 1


def test_message_sizes_that_do_not_match(tmp_path: Path) -> None:
    base = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos")
    good = [data(0, pos_payload(10 + i, i)) for i in range(5)]
    for bad in (data(0, b"\x01" * 7), data(0, pos_payload(1, 1) + b"\0" * 40), b"\x01\x00D\x00"):
        r = polybag.open(base + good[0] + bad + b"".join(good[1:]), recover=True)
        assert list(r.topic_columns("pos")["timestamp"]) == [10, 11, 12, 13, 14]
        assert len(r.recovery_report["errors"]) == 1
        with pytest.raises(FormatError):
            list(polybag.open(base + good[0] + bad + b"".join(good[1:])).messages())


_MEMORY_CHILD = """
import resource, sys
sys.path.insert(0, {src!r})
import polybag
for path in sys.argv[1:]:
    r = polybag.open(path, recover=True)
    n = sum(1 for _ in r.messages())
    r.topic_columns("pos")
    r.close()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_declared_sizes_cost_no_memory(tmp_path: Path) -> None:
    """Formats that declare gigabytes (4294967295-item arrays, 65535 x 65535 nested
    arrays, billions of empty nested items) are refused before anything is allocated: a
    child reading all of them stays near an import-only child."""
    paths = []
    for case in ("absurd array", "array of arrays", "empty items", "larger than a message", "deep 5000"):
        paths.append(write(tmp_path, f"{len(paths)}.ulg", _evil_log(HOSTILE[case][0], bytes(16), n=200)))
    src = str(Path(__file__).resolve().parents[3] / "src")
    base = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD.format(src=src)], capture_output=True, text=True, check=True
    )
    run = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD.format(src=src), *paths], capture_output=True, text=True, check=True
    )
    assert "Traceback" not in run.stderr
    grown_kb = int(run.stdout.split()[-1]) - int(base.stdout.split()[-1])
    assert grown_kb < 64 * 1024, f"{grown_kb} KB more than an import-only child"


def test_compile_refuses_before_allocating() -> None:
    formats = {"e": parse_format("e:"), "m": parse_format("m:e[65535] a;")}
    formats["top"] = parse_format("top:uint64_t timestamp;m[65535] b;")
    with pytest.raises(ValueError, match="fields and nested items"):
        compile_type("top", formats)
    chain = {f"t{k}": parse_format(f"t{k}:t{k + 1} x;") for k in range(5000)}
    chain["t5000"] = parse_format("t5000:uint8_t v;")
    with pytest.raises(ValueError, match=f"more than {MAX_DEPTH} deep"):
        compile_type("t0", chain)
    assert compile_type(f"t{5000 - MAX_DEPTH + 1}", chain).size == 1  # as deep as allowed
    schema = Schema(1, "t0", "ulog", "\n".join(f.text() for f in chain.values()).encode())
    with pytest.raises(FormatError, match="deep"):
        type_for_schema(schema)
    with pytest.raises(ValueError, match="too big"):
        parse_format("x:float[4294967295] y;")


def test_hostile_ulog_schemas_in_other_containers() -> None:
    """A ULog schema met in an MCAP (the ULog -> ROS 1 mapping) or a ROS 1 type going to
    ULog: deep chains, cycles and huge arrays are polybag errors."""
    from polybag.bridges.ros1_ulog import ros1_channel_to_ulog
    from polybag.bridges.ulog_ros1 import ulog_channel_to_ros1

    for case, (formats, _) in HOSTILE.items():
        if case == "no utf-8 name":
            continue  # decoded with replacement characters: a valid (odd) name there
        text = b"\n".join(formats)
        ch = Channel(1, "evil", "ulog", Schema(1, "evil", "ulog", text), {})
        with pytest.raises(PolybagError):
            ulog_channel_to_ros1(ch)
    deep = "t0 x\n" + "".join(f"{'=' * 80}\nMSG: p/t{k}\nt{k + 1} x\n" for k in range(5000))
    for definition in (
        deep.replace("t0 x", "p/t0 x", 1),
        "uint8[4294967295] x\n",
        "uint8[" + "9" * 5000 + "] x\n",
        "float64[9000] x\n",
    ):
        ch = Channel(1, "/t", "ros1", Schema(1, "p/T", "ros1msg", definition.encode()), {})
        with pytest.raises(UnsupportedError):
            ros1_channel_to_ulog(ch)


def test_writer_refuses_bad_formats_with_write_errors(tmp_path: Path) -> None:
    with UlogWriter(tmp_path / "w.ulg") as w:
        for text in ("x:float[4294967295] y;", "nocolon", "x:float", "x:float[3 y;"):
            with pytest.raises(WriteError):
                w.add_format(text)
        w.add_format("self:uint64_t timestamp;self s;")
        with pytest.raises(WriteError, match="contains itself"):
            w.add_subscription("self")
        with pytest.raises(WriteError):
            w.add_channel("a", "ulog", w.add_schema("a", "ulog", b"a:uint64_t timestamp;"), {"multi_id": "x"})


# --- warnings -----------------------------------------------------------------------------------
def _unknown_type_log() -> bytes:
    b = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos") + msg("Z", b"later version")
    return b + data(0, pos_payload(5, 1))


def test_ulog_warnings_are_polybag_warnings(tmp_path: Path) -> None:
    from polybag.formats.mcap.reader import McapIndexWarning

    assert polybag.PolybagWarning is PolybagWarning and issubclass(PolybagWarning, UserWarning)
    assert issubclass(McapIndexWarning, PolybagWarning)
    with pytest.warns(PolybagWarning, match="unknown message type 'Z'") as rec:
        polybag.open(_unknown_type_log())
    assert ".py" not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        polybag.open(_unknown_type_log(), warn=False)  # off when asked


def test_cli_prints_polybag_warnings_as_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "z.ulg", _unknown_type_log())
    code = "import sys; from polybag.cli import main; sys.exit(main(sys.argv[1:]))"
    src = str(Path(__file__).resolve().parents[3] / "src")
    for cmd in (["cat", path], ["info", path], ["check", path]):
        p = subprocess.run(
            [sys.executable, "-c", code, *cmd], capture_output=True, text=True, env={"PYTHONPATH": src}
        )
        assert p.returncode == 0, p.stderr
        lines = p.stderr.splitlines()
        assert len(lines) == 1, p.stderr
        assert lines[0].startswith(f"polybag {cmd[0]}: warning: {path}: offset ")
        assert lines[0].endswith(": skipping unknown message type 'Z' (13 bytes)")
        assert "UserWarning" not in p.stderr and "reader.py" not in p.stderr


# --- property: any repeats, any order -------------------------------------------------------------
_NAMES = ["x", "x_1", "x_2", "_padding0", "y", "class", "__init__"]
_TYPES = {"uint8_t": "B", "int16_t": "h", "int32_t": "i", "float": "f", "double": "d", "uint64_t": "Q"}


def _expected_names(names: list[str]) -> list[str]:
    """The naming rule, written out independently: the first use keeps the name, a repeat
    takes the smallest ``_k`` (k >= 1) that is none of the format's names nor taken."""
    taken = set(names)
    out: list[str] = []
    for n in names:
        if n in out:
            k = 1
            while f"{n}_{k}" in taken or f"{n}_{k}" in out:
                k += 1
            n = f"{n}_{k}"
        out.append(n)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(_TYPES)), st.sampled_from([0, 1, 3]), st.sampled_from(_NAMES)),
        min_size=1,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_any_repeated_names_decode_and_round_trip(fields: list[tuple[str, int, str]], rnd: Any) -> None:
    fields = [("uint64_t", 0, "timestamp"), *fields]
    text = "t:" + "".join(f"{t}[{a}] {n};" if a else f"{t} {n};" for t, a, n in fields)
    names = _expected_names([n for _, _, n in fields])
    values: dict[str, Any] = {}
    payload = b""
    for (t, a, _), name in zip(fields, names):
        code = _TYPES[t]
        items = []
        for _ in range(a or 1):
            if name.startswith("_padding"):
                v: Any = 0  # filler: encoded as zeros
            elif code in "fd":
                v = float(np.float32(rnd.uniform(-100, 100)))
            else:
                size = struct.calcsize(code)
                lo = -(1 << (8 * size - 1)) if code.islower() else 0
                v = rnd.randrange(lo, lo + (1 << (8 * size)))
            items.append(v)
            payload += struct.pack("<" + code, v)
        values[name] = items if a else items[0]
    values["timestamp"] = 1234
    payload = struct.pack("<Q", 1234) + payload[8:]
    utype = compile_type("t", {"t": parse_format(text)})
    got = utype.to_dict(payload)
    want = {k: v for k, v in values.items() if not k.startswith("_padding")}
    assert got == want
    # trailing padding may be left out of the data; the writer takes the dict back
    assert utype.encode(got) == payload[: utype.min_size]
    out = __import__("io").BytesIO()
    with UlogWriter(out) as w:
        w.add_format(text)
        ch = w.add_subscription("t")
        w.write(ch, payload[: utype.min_size], 1_234_000)
    with polybag.open(out.getvalue()) as r:
        (m,) = list(r.messages())
        assert m.decode().__dict__ == got
        assert r.ulog.formats["t"].text() == text


def test_msg_id_reused_between_usable_and_unusable_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    """A msg_id first subscribed with an unusable format and then with a good one (and the
    reverse): each data message belongs to the subscription in force, on both lookup paths
    (one chunk holding both subscriptions, and small chunks)."""
    b = header() + flags() + fmt("evil:uint64_t timestamp;evil me;") + fmt(POS_FMT)
    b += sub(0, 0, "evil") + sub(1, 1, "pos")
    for i in range(20):
        b += data(0, bytes(16)) + data(1, pos_payload(100 + i, i))
    b += sub(2, 0, "pos") + b"".join(data(0, pos_payload(200 + i, i)) for i in range(20))
    b += sub(0, 1, "evil")
    for i in range(20):
        b += data(1, bytes(10)) + data(0, pos_payload(300 + i, i))
    for limit in (1 << 16, 7):
        monkeypatch.setattr(ulog_reader, "_WALK_LIMIT", limit)
        for topics in (None, ["pos"]):
            r = polybag.open(b, recover=True, warn=False, topics=topics)
            assert list(r.topic_columns("pos", 1)["timestamp"]) == list(range(100, 120))
            assert list(r.topic_columns("pos", 2)["timestamp"]) == list(range(200, 220)) + list(range(300, 320))
            assert sum(1 for _ in r.messages()) == 60
            errors = r.recovery_report["errors"]
            assert len(errors) == 2 and all("evil" in e and "20 data message" in e for e in errors)
            assert r.recovery_report["bytes_skipped"] == 20 * 21 + 20 * 15


# --- PX4 events: definitions are data from the file -------------------------------------------
EVENT_FMT = (
    "event:uint64_t timestamp;uint32_t id;uint16_t event_sequence;uint8_t[25] arguments;"
    "uint8_t log_levels;uint8_t[5] _padding0;"
)


def _events_log(definitions: bytes, args: bytes = struct.pack("<f", 1.5)) -> bytes:
    out = [header(), flags(), fmt(EVENT_FMT)]
    for k in range(0, max(len(definitions), 1), 60000):
        part = definitions[k : k + 60000]
        key = f"uint8_t[{len(part)}] metadata_events".encode()
        out.append(msg("M", bytes([1 if k else 0, len(key)]) + key + part))
    key = b"char[4] metadata_events_sha256"
    out.append(msg("I", bytes([len(key)]) + key + b"abcd"))
    out.append(sub(0, 0, "event"))
    body = struct.pack("<QIH", 5_000_000, (1 << 24) | 5, 0) + args.ljust(25, b"\0") + bytes([0x60])
    out.append(data(0, body))
    return b"".join(out)


def _definitions(message: str, components: Any = None) -> bytes:
    import lzma

    event = {"message": message, "arguments": [{"type": "float"}]}
    comps = {"1": {"namespace": "px4", "event_groups": {"default": {"events": {"5": event}}}}}
    doc = {"version": 2, "components": comps if components is None else components}
    return lzma.compress(json.dumps(doc).encode())


def test_events_decode_and_hostile_definitions() -> None:
    from polybag.formats.ulog.events import logged_events

    r = polybag.open(_events_log(_definitions("value {1:.2}")))
    assert logged_events(r) == [(5_000_000, "INFO", "value 1.50")]
    # a precision of a billion digits is capped (it would be a gigabyte string)
    r = polybag.open(_events_log(_definitions("value {1:.999999999} {" + "9" * 5000 + "}")))
    ((_, _, text),) = logged_events(r)  # type: ignore[misc]
    assert text.startswith("value 1.5000") and len(text) < 5100
    # JSON of another shape: no decoded events, no exception
    unknown = [(5_000_000, "INFO", "[Unknown event with ID 16777221]")]
    for comps in ([1, 2], {"x": 5}, {"1": {"event_groups": []}}, {"nan": {}}, {"1": {"event_groups": {"default": 3}}}):
        assert logged_events(polybag.open(_events_log(_definitions("v", comps)))) in (None, unknown)
    assert logged_events(polybag.open(_events_log(b"not xz at all"))) is None


def test_events_definitions_bomb_is_not_expanded() -> None:
    """A 128 MiB xz stream of zeros (about 20 KB in the log) is refused at the bound
    (16 MiB) while decompressing: it is never expanded in full."""
    import lzma
    import tracemalloc

    from polybag.formats.ulog.events import MAX_DEFINITIONS_BYTES, EventDefinitions

    comp = lzma.LZMACompressor(preset=0)
    bomb = b"".join(comp.compress(bytes(1 << 24)) for _ in range(8)) + comp.flush()
    assert len(bomb) < 100_000
    r = polybag.open(_events_log(bomb))
    tracemalloc.start()
    try:
        assert EventDefinitions.from_ulog(r.ulog) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * MAX_DEFINITIONS_BYTES + (4 << 20)
