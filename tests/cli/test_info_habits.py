"""``polybag info`` as users of ``rosbag info`` and ``ros2 bag info`` expect (issue 27).

Several files in one call (``---`` between them, exit status the worst, ``--json`` a list);
``-y``/``-k`` with rosbag's keys and values (checked against rosbag-standalone's own
``rosbag info --yaml``); human start/end/duration for every format; an MCAP's internals only
behind ``-v`` and its attachments listed once; rosbag2 topics as ``ros2 bag info`` lines with
their offered QoS (checked against rosbags); a short ULog default and pyulog's whole dump
behind ``-v`` (checked against pyulog).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from paths import CORPORA, ROOT
from polybag.cli import main

BAGS = [
    CORPORA / "rosbag" / "foxglove-rosbag" / "example-lz4.bag",
    CORPORA / "rosbag" / "foxglove-rosbag" / "example-bz2.bag",
    CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag",
    CORPORA / "rosbag" / "rosbag2_bag_v2" / "test_bag_multiple_connections.bag",
]
LZ4_BAG = BAGS[0]
MCAP = CORPORA / "mcap-samples" / "lichtblick" / "example.mcap"
ATTACHMENT = CORPORA / "mcap-conformance" / "OneAttachment" / "OneAttachment-ax-pad-st-sum.mcap"
METADATA = CORPORA / "mcap-conformance" / "OneMetadata" / "OneMetadata-mdx-pad-st-sum.mcap"
ROSBAG2_OLD = CORPORA / "mcap-samples" / "rosbag2" / "talker"  # metadata version 4, QoS as a numeric string
ROSBAG2_V8 = CORPORA / "mcap-samples" / "rosbag2" / "bag_with_topics_and_service_events"
ROSBAG2_V9 = (
    ROOT / "tests" / "formats" / "rosbag2" / "data" / "looping_walk"
)  # version 9, QoS as a list of names
ULOGS = sorted((CORPORA / "ulog").glob("*.ulg"))
ULOG = CORPORA / "ulog" / "sample.ulg"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["info", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _utc(sec: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=sec)).strftime(
        "%b %d %Y %H:%M:%S"
    )


def _line(out: str, label: str) -> str:
    got = [x for x in out.splitlines() if x.startswith(label)]
    assert len(got) == 1, (label, out)
    return got[0][len(label) :].strip()


# --- several files ---------------------------------------------------------------------------


def test_several_files_each_described_with_its_header(capsys: pytest.CaptureFixture[str]) -> None:
    files = [LZ4_BAG, MCAP, ROSBAG2_OLD, ULOG]
    code, out, err = _run(capsys, *map(str, files))
    assert code == 0 and err == ""
    blocks = out.split("\n---\n")
    assert len(blocks) == len(files)
    for block, f in zip(blocks, files):
        assert block.splitlines()[0].split(None, 1) == ["path:", str(f)]
    assert "lz4 [1/1 chunks" in blocks[0] and "mouse" in blocks[1]
    assert "Topic information:" in blocks[2] and "sensor_combined" in blocks[3]


def test_several_files_exit_status_is_the_worst(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.mcap"
    data = MCAP.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])  # a damaged file: described, exit 1
    missing = tmp_path / "missing.bag"
    code, out, err = _run(capsys, str(LZ4_BAG), str(cut))
    assert code == 1
    assert out.count("path:") == 2 and "damaged" in err and str(cut) in err
    code, out, err = _run(capsys, str(missing), str(cut), str(LZ4_BAG))
    assert code == 3  # an unreadable one still lets the others be described
    assert str(missing) in err and "Traceback" not in err
    assert f"path:         {LZ4_BAG}" in out and f"path:         {cut}" in out


def test_several_files_json_is_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--json", str(LZ4_BAG), str(MCAP))
    assert code == 0
    docs = json.loads(out)
    assert [d["path"] for d in docs] == [str(LZ4_BAG), str(MCAP)]
    assert [d["message_count"] for d in docs] == [8647, 111]
    code, out, _ = _run(capsys, "--json", str(MCAP))
    assert json.loads(out)["message_count"] == 111  # one file: one object, as before
    code, out, _ = _run(capsys, "--json", str(MCAP), str(tmp_path / "nope.mcap"))
    assert code == 3
    docs = json.loads(out)
    assert docs[0]["message_count"] == 111 and docs[1]["path"].endswith("nope.mcap") and docs[1]["error"]


# --- -y and -k as rosbag's -------------------------------------------------------------------


def _rosbag_yaml(path: Path, key: str | None = None) -> Any:
    import rosbag

    with rosbag.Bag(str(path)) as b:
        return b._get_yaml_info(key=key)


@pytest.mark.parametrize("bag", BAGS, ids=lambda p: p.name)
def test_yaml_has_rosbags_keys_and_values(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = yaml.safe_load(_rosbag_yaml(bag))
    for flag in ("-y", "--yaml"):
        code, out, _ = _run(capsys, flag, str(bag))
        assert code == 0
        ours = yaml.safe_load(out)
        assert list(ours) == list(theirs)
        for k in ("path", "version", "size", "messages", "indexed", "compression", "types"):
            assert ours[k] == theirs[k], k
        for k in ("duration", "start", "end"):
            assert ours[k] == pytest.approx(theirs[k], abs=1e-6), k
        assert [(t["topic"], t["type"], t["messages"], t.get("connections")) for t in ours["topics"]] == [
            (t["topic"], t["type"], t["messages"], t.get("connections")) for t in theirs["topics"]
        ]
        for a, b in zip(ours["topics"], theirs["topics"]):
            assert (a.get("frequency") is None) == (b.get("frequency") is None)
            if b.get("frequency"):
                assert a["frequency"] == pytest.approx(b["frequency"], rel=1e-2)


KEYS = [
    "duration",
    "start",
    "end",
    "size",
    "messages",
    "compression",
    "indexed",
    "version",
    "types[0]",
    "types[1].md5",
    "topics[2].messages",
]


@pytest.mark.parametrize("key", KEYS)
def test_key_prints_what_rosbag_prints(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    want = _rosbag_yaml(LZ4_BAG, key)
    assert want is not None
    code, out, _ = _run(capsys, "-y", "-k", key, str(LZ4_BAG))
    assert code == 0 and out.strip() == want.strip()
    code, out2, _ = _run(capsys, "--key", key, str(LZ4_BAG))  # -k alone implies -y
    assert code == 0 and out2 == out


def test_key_of_a_list_and_dotted_indexes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-k", "topics", str(LZ4_BAG))
    assert code == 0
    topics = yaml.safe_load(out)
    assert [t["topic"] for t in topics] == [
        t["topic"] for t in yaml.safe_load(_rosbag_yaml(LZ4_BAG))["topics"]
    ]
    code, a, _ = _run(capsys, "-k", "topics.1.type", str(LZ4_BAG))
    code, b, _ = _run(capsys, "-k", "topics[1].type", str(LZ4_BAG))
    assert a == b == "tf/tfMessage\n"


def test_unknown_key_is_a_usage_error_listing_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "-k", "durration", str(LZ4_BAG))
    assert code == 2 and out == ""
    assert "durration" in err and "duration" in err and "Traceback" not in err
    code, _, err = _run(capsys, "-k", "topics[99]", str(LZ4_BAG))
    assert code == 2 and "99" in err


def test_key_on_several_files_one_value_each(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-k", "messages", str(LZ4_BAG), str(MCAP), str(ROSBAG2_OLD))
    assert code == 0
    assert out.split("\n---\n") == ["8647", "111", "20\n"]


@pytest.mark.parametrize("path", [MCAP, ROSBAG2_OLD, ROSBAG2_V9, ULOG], ids=lambda p: p.name)
def test_yaml_same_keys_for_every_format(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "-y", str(path))
    assert code == 0
    doc = yaml.safe_load(out)
    theirs = yaml.safe_load(_rosbag_yaml(LZ4_BAG))
    common = [k for k in theirs if k not in ("uncompressed", "compressed")]
    assert [k for k in doc if k in common] == common  # rosbag's keys, in rosbag's order
    assert set(common) <= set(doc)
    code, js, _ = _run(capsys, "--json", str(path))
    d = json.loads(js)
    assert doc["messages"] == d["message_count"] and doc["size"] == d["file_size"]
    assert doc["duration"] == pytest.approx(d["duration_ns"] / 1e9, abs=1e-6)
    assert doc["start"] == pytest.approx((d["start_time"] or 0) / 1e9, abs=1e-6)
    counts: dict[str, int] = {}
    for c in d["channels"]:
        counts[c["topic"]] = counts.get(c["topic"], 0) + c["message_count"]
    assert {t["topic"]: t["messages"] for t in doc["topics"]} == counts
    for t in doc["topics"]:
        assert set(t) >= {"topic", "type", "messages"}


def test_yaml_format_specific_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.rosbag2 import Reader

    _, out, _ = _run(capsys, "-y", str(ROSBAG2_V8))
    doc = yaml.safe_load(out)
    with Reader(ROSBAG2_V8) as r:
        assert doc["storage_identifier"] == "mcap"
        assert doc["version"] == 8
        assert {t["topic"]: t["messages"] for t in doc["topics"]} == {
            c.topic: c.msgcount for c in r.connections
        }
        assert all(t["serialization_format"] == "cdr" and t["qos"] for t in doc["topics"])
    _, out, _ = _run(capsys, "-y", str(ATTACHMENT))
    doc = yaml.safe_load(out)
    assert [a["name"] for a in doc["attachments"]] == ["myFile"] and doc["metadata"] == []
    _, out, _ = _run(capsys, "-y", str(ULOG))
    u = yaml.safe_load(out)["ulog"]
    import pyulog

    ref = pyulog.ULog(str(ULOG))
    assert u["parameters"] == len(ref.initial_parameters)
    assert u["changed_parameters"] == len(ref.changed_parameters)
    assert u["dropouts"] == len(ref.dropouts)
    assert u["logged_messages"] == len(ref.logged_messages)
    assert u["sys_name"] == ref.msg_info_dict["sys_name"]


# --- human times for every format ------------------------------------------------------------


def test_bag_times_as_rosbag_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    ref = yaml.safe_load(_rosbag_yaml(LZ4_BAG))
    _, out, _ = _run(capsys, str(LZ4_BAG))
    for label in ("start", "end"):
        sec = ref[label]
        want = f"{_utc(int(sec))}.{int(round(sec * 1e6)) % 1_000_000 // 10_000:02d} ({int(sec)}.{int(round(sec * 1e6)) % 1_000_000 // 10_000:02d})"
        assert _line(out, f"{label}:") == want
    assert _line(out, "duration:") == f"{ref['duration']:.1f}s"  # 21.7s: under a minute


def test_mcap_times_are_human_and_exact(capsys: pytest.CaptureFixture[str]) -> None:
    from mcap.reader import make_reader

    with MCAP.open("rb") as f:
        st = make_reader(f).get_summary().statistics  # type: ignore[union-attr]
    _, out, _ = _run(capsys, str(MCAP))
    for label, ns in (("start:", st.message_start_time), ("end:", st.message_end_time)):
        sec, frac = divmod(ns, 1_000_000_000)
        assert _line(out, label) == f"{_utc(sec)}.{frac:09d} ({sec}.{frac:09d})"
    assert _line(out, "duration:") == f"{(st.message_end_time - st.message_start_time) / 1e9:.3f}s"
    assert not re.search(r"^(start|end):\s+\d+\.\d+$", out, re.M)  # no raw epoch seconds


@pytest.mark.parametrize("bag", [ROSBAG2_OLD, ROSBAG2_V8, ROSBAG2_V9], ids=lambda p: p.name)
def test_rosbag2_times_are_human(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.rosbag2 import Reader

    with Reader(bag) as r:
        start, end = r.start_time, r.end_time - 1  # rosbags' end is one past the last message
    _, out, _ = _run(capsys, str(bag))
    for label, ns in (("Start:", start), ("End:", end)):
        sec, frac = divmod(ns, 1_000_000_000)
        assert _line(out, label) == f"{_utc(sec)}.{frac:09d} ({sec}.{frac:09d})"


@pytest.mark.parametrize("path", ULOGS, ids=lambda p: p.name)
def test_ulog_times_since_boot_and_rosbag_style_duration(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyulog

    ref = pyulog.ULog(str(path))
    _, out, _ = _run(capsys, str(path))
    assert _line(out, "start:").endswith(f"since boot ({ref.start_timestamp / 1e6:.2f})")
    assert _line(out, "end:").endswith(f"since boot ({ref.last_timestamp / 1e6:.2f})")
    secs = int((ref.last_timestamp - ref.start_timestamp) / 1e6)
    dur = _line(out, "duration:")
    if secs >= 3600:
        assert dur.endswith(f"({secs}s)") and "hr" in dur
    elif secs >= 60:
        assert dur == f"{secs // 60}:{secs % 60:02d}s ({secs}s)"
    else:
        assert dur == f"{(ref.last_timestamp - ref.start_timestamp) / 1e6:.1f}s"


# --- MCAP: no internals by default, attachments and metadata once -----------------------------


def test_mcap_default_has_no_internals_and_v_has_them(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, str(MCAP))
    assert not re.search(r"^(statistics|summary_offsets):", out, re.M)
    assert "message_start_time" not in out
    _, verbose, _ = _run(capsys, "-v", str(MCAP))
    assert re.search(r"^statistics:", verbose, re.M) and re.search(r"^summary_offsets:", verbose, re.M)
    _, js, _ = _run(capsys, "--json", str(MCAP))
    assert "statistics" in json.loads(js)["extras"]  # --json keeps everything


def test_mcap_attachments_and_metadata_listed_once(capsys: pytest.CaptureFixture[str]) -> None:
    from mcap.reader import make_reader

    with ATTACHMENT.open("rb") as f:
        (att,) = list(make_reader(f).iter_attachments())
    _, out, _ = _run(capsys, str(ATTACHMENT))
    assert out.count(att.name) == 1 and len(re.findall(r"^attachments:", out, re.M)) == 1
    assert _line(out, "attachments:") == "1"
    (row,) = [x for x in out.splitlines() if att.name in x]
    assert att.media_type in row and f"({att.log_time // 10**9}.{att.log_time % 10**9:09d})" in row
    with METADATA.open("rb") as f:
        (meta,) = list(make_reader(f).iter_metadata())
    _, out, _ = _run(capsys, str(METADATA))
    assert out.count(meta.name) == 1 and len(re.findall(r"^metadata:", out, re.M)) == 1
    assert _line(out, "metadata:") == "1"


# --- rosbag2: ros2 bag info's layout with the offered QoS --------------------------------------


def _qos_words(profiles: list[Any]) -> str:
    out = []
    for p in profiles:
        hist = p.history.name.lower()
        hist = f"keep_last({p.depth})" if hist == "keep_last" else hist
        words = [p.reliability.name.lower(), p.durability.name.lower(), hist]
        # deadline, lifespan and liveliness as ros2 bag info shows them: only when set
        for name, t in (("deadline", p.deadline), ("lifespan", p.lifespan)):
            if (t.sec, t.nsec) != (0, 0) and t.sec < 2147483647:
                words.append(f"{name}({t.sec + t.nsec / 1e9:g}s)")
        if p.liveliness.name.lower() not in ("system_default", "automatic"):
            words.append(p.liveliness.name.lower())
        lease = p.liveliness_lease_duration
        if (lease.sec, lease.nsec) != (0, 0) and lease.sec < 2147483647:
            words.append(f"liveliness_lease({lease.sec + lease.nsec / 1e9:g}s)")
        out.append(" ".join(words))
    return "; ".join(out)


@pytest.mark.parametrize("bag", [ROSBAG2_OLD, ROSBAG2_V8, ROSBAG2_V9], ids=lambda p: p.name)
def test_rosbag2_topic_lines_with_qos(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.rosbag2 import Reader

    code, out, _ = _run(capsys, str(bag))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Files:") and any(x.startswith("Topic information: Topic: ") for x in lines)
    with Reader(bag) as r:
        meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        assert _line(out, "Storage id:") == meta["storage_identifier"]
        assert _line(out, "Messages:") == str(r.message_count)
        for c in r.connections:
            service = c.topic.endswith("/_service_event")
            if service:
                want = f"Service: {c.topic.rsplit('/', 1)[0]} | Type: {c.msgtype[: -len('_Event')]} | Event Count: {c.msgcount}"
            else:
                want = f"Topic: {c.topic} | Type: {c.msgtype} | Count: {c.msgcount}"
            want += f" | Serialization Format: {c.ext.serialization_format}"
            if c.ext.offered_qos_profiles:
                want += f" | QoS: {_qos_words(c.ext.offered_qos_profiles)}"
            assert sum(1 for x in lines if x.endswith(want) and (x.startswith(" ") or ": " in x)) == 1, want
    if bag == ROSBAG2_V8:
        assert _line(out, "Service:") == "2" and "Service information: Service: /test_service1" in out


# --- ULog: short by default, pyulog's whole dump with -v ---------------------------------------


@pytest.mark.parametrize("path", ULOGS, ids=lambda p: p.name)
def test_ulog_short_default_and_full_dump_with_v(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyulog
    from pyulog.info import show_info

    ref = pyulog.ULog(str(path))
    code, short, _ = _run(capsys, str(path))
    assert code in (0, 1)
    assert _line(short, "path:") == str(path)
    assert _line(short, "parameters:").startswith(
        f"{len(ref.initial_parameters)} ({len(ref.changed_parameters)} changed"
    )
    assert _line(short, "info:").startswith(f"{len(ref.msg_info_dict)} keys")
    logged = len(ref.logged_messages) + sum(len(v) for v in ref.logged_messages_tagged.values())
    assert _line(short, "logged:").startswith(f"{logged} messages")
    dropouts = _line(short, "dropouts:")
    assert dropouts == "none" if not ref.dropouts else dropouts.startswith(f"{len(ref.dropouts)} (")
    assert "Info Multiple Messages" not in short and "perf_" not in short
    rows = {}
    for x in short.splitlines():
        m = re.match(r"^(?:topics:)?\s+(\w+)(?: \((\d+)\))?\s+(\d+) msgs?\b", x)
        if m:
            rows[(m.group(1), int(m.group(2) or 0))] = int(m.group(3))
    want = {(d.name, d.multi_id): len(d.data["timestamp"]) for d in ref.data_list if len(d.data["timestamp"])}
    assert rows == want
    code, full, _ = _run(capsys, "-v", str(path))
    show_info(ref, True)
    pyulog_dump = capsys.readouterr().out.strip()
    assert full.startswith(pyulog_dump)  # ulog_info -v, then the parameters and logged messages
    assert len(full) > len(short)
    for name in ref.initial_parameters:
        assert re.search(rf"^ {re.escape(name)}: ", full, re.M), name
    tail = full[len(pyulog_dump) :]
    assert f"Logged Messages ({logged}):" in tail
    from polybag.util.text import safe_line  # control characters (colour codes) are shown escaped

    for m in ref.logged_messages[:50]:
        assert safe_line(m.message.strip())[:40] in tail
