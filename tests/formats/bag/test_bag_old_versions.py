"""Bags before 2.0, built from the format descriptions in ../shared/specs.

Each builder names the spec section it follows: ``rosbag-format-v1.x.txt`` ("Version 1.2",
"Version 1.1") and ``rosbag-versions-overview.txt`` ("Version 0", "Version 1.0",
"Version 1.1", "Alternative Version 1.1").
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from bag_helpers import (  # noqa: F401
    DEFS,
    MSGS,
    build_roslog_v10,
    build_v11,
    build_v12,
    expected,
    field,
    line_record,
    record,
)
from polybag.errors import PolybagError, TruncatedError

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
INT32_MD5 = "da5909fbe378aeaf85e547e830cc1bb7"




# (topic, md5, type, sec, nsec, data); payloads contain newlines and NULs on purpose


















def read(data: bytes, name: str = "x.bag", tmp_path=None, **kw):
    with polybag.open(data, format="bag", **kw) as r:
        return r, [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]


@pytest.mark.parametrize(
    "build,version",
    [
        (lambda: build_v11(b"#ROSRECORD V1.1\n"), "1.1"),  # rosbag-format-v1.x "Version 1.1"
        (lambda: build_v11(b"#ROSLOG V1.1\n"), "ROSLOG 1.1"),  # versions-overview "Version 1.1"
        (build_roslog_v10, "ROSLOG 1.0"),  # versions-overview "Version 1.0"
        (lambda: build_v11(b""), "0"),  # versions-overview "Version 0": no version line
    ],
    ids=["ROSRECORD-1.1", "ROSLOG-1.1", "ROSLOG-1.0", "version-0"],
)
def test_line_formats(build, version, tmp_path):
    data = build()
    p = tmp_path / "old.bag"
    p.write_bytes(data)
    with polybag.open(p) as r:  # sniffed (version 0 by the .bag name and a plausible record)
        s = r.summary
        assert s.version == version and s.message_count == 4
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
        ordered = [m.log_time for m in r.messages()]
        chans = {c.topic: c for c in s.channels.values()}
        assert chans["/chatter"].metadata == {"md5sum": STRING_MD5, "type": "std_msgs/String"}
        assert chans["/count"].schema.name == "std_msgs/Int32" and chans["/count"].schema.data == b""
        assert r.info_extras()["messages"] == 4
    assert got == expected()
    assert ordered == sorted(ordered)
    assert (s.start_time, s.end_time) == (99 * 10**9 + 999_999_999, 101 * 10**9)


@pytest.mark.parametrize("with_index", [True, False])
@pytest.mark.parametrize("time_field", [False, True])
def test_rosrecord_v12(with_index, time_field):
    data = build_v12(with_index=with_index, time_field=time_field)
    r, got = read(data)
    assert got == expected()
    s = r.summary
    assert s.version == "1.2"
    chans = {c.topic: c for c in s.channels.values()}
    assert chans["/chatter"].schema.data == b"string data\n"
    assert chans["/count"].metadata["md5sum"] == INT32_MD5
    if with_index:
        assert s.extras["index_counts"] == {"/chatter": 2, "/count": 2}
        assert "index_mismatch" not in s.extras
    else:
        assert s.extras["index_pos"] == 0


@pytest.mark.parametrize(
    "build",
    [lambda: build_v11(b"#ROSRECORD V1.1\n"), build_roslog_v10, lambda: build_v12(with_index=False)],
    ids=["1.1", "ROSLOG-1.0", "1.2"],
)
def test_truncated_old_bags(build):
    data = build()
    full = expected()
    for cut in range(20, len(data)):
        piece = data[:cut]
        got = []
        try:
            with polybag.open(piece, format="bag") as r:
                for m in r.messages(order="file"):
                    got.append((m.topic, m.log_time, bytes(m.data)))
        except TruncatedError as e:
            assert e.offset is not None
        except PolybagError:
            pass
        assert got == full[: len(got)]
        with polybag.open(piece, format="bag", recover=True) as r:
            rec = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
            assert r.recovery_report["messages"] == len(rec)
        assert rec == got


def test_garbage_after_magic_is_a_polybag_error():
    for magic in (b"#ROSRECORD V1.1\n", b"#ROSLOG V1.0\n", b"#ROSRECORD V1.2\n"):
        blob = magic + b"\xff" * 64
        with pytest.raises(PolybagError):
            with polybag.open(blob) as r:
                list(r.messages())
    with pytest.raises(PolybagError, match="version line"):
        polybag.open(b"#ROSBAG V3.0\n" + b"\x00" * 100)


def test_convert_v11_to_v20_keeps_everything(tmp_path):
    data = build_v11(b"#ROSRECORD V1.1\n")
    out = tmp_path / "new.bag"
    with polybag.open(data) as r, polybag.Writer(out) as w:
        for m in r.messages(order="file"):
            w.write_message(m)
    with polybag.open(out) as r:
        assert r.summary.version == "2.0"
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")] == expected()
        md5s = {c.topic: c.metadata["md5sum"] for c in r.summary.channels.values()}
    assert md5s == {"/chatter": STRING_MD5, "/count": INT32_MD5}


def test_converted_old_bag_gets_bundled_definitions(tmp_path):
    """Old bags carry only type + md5sum; the 2.0 writer fills in a known definition whose
    md5sum matches, so peers that need the definition text (rosbags) can decode."""
    try:
        from polybag.codecs.ros1 import lookup_md5
    except Exception:
        pytest.skip("polybag.codecs.ros1 not available")
    if lookup_md5(STRING_MD5) is None:
        pytest.skip("std_msgs/String is not bundled")
    out = tmp_path / "new.bag"
    with polybag.open(build_v11(b"#ROSLOG V1.1\n"), format="bag") as r, polybag.Writer(out) as w:
        for m in r.messages(order="file"):
            w.write_message(m)
    with polybag.open(out) as r:
        defs = {c.topic: c.schema.data for c in r.summary.channels.values()}
    assert defs["/chatter"].strip() == b"string data"
    from rosbags.rosbag1 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.EMPTY)
    with Reader(out) as rr:
        for c in rr.connections:
            from rosbags.typesys import get_types_from_msg

            ts.register(get_types_from_msg(c.msgdef.data, c.msgtype))
        vals = [ts.deserialize_ros1(raw, c.msgtype).data for c, _t, raw in rr.messages() if c.topic == "/chatter"]
    assert vals == ["hello\nworld", "\x00\n\n"]

BUILDERS = {
    "1.1": lambda: build_v11(b"#ROSRECORD V1.1\n"),
    "roslog-1.1": lambda: build_v11(b"#ROSLOG V1.1\n"),
    "roslog-1.0": build_roslog_v10,
    "1.2": lambda: build_v12(with_index=True),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(BUILDERS)),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=5),
)
def test_corrupted_old_bags_only_polybag_errors(kind, edits):
    data = bytearray(BUILDERS[kind]())
    start = data.index(b"\n") + 1  # keep the version line
    for p, v in edits:
        data[start + p % (len(data) - start)] = v
    blob = bytes(data)
    try:
        with polybag.open(blob, format="bag") as r:
            r.info_extras()
            list(r.messages())
    except PolybagError:
        pass
    with polybag.open(blob, format="bag", recover=True) as r:
        n = len(list(r.messages()))
        assert r.recovery_report["messages"] == n


def test_definitions_from_another_file_or_mapping(tmp_path):
    """versions-overview "Version 1.1" records carry type + md5sum only; the text can come
    from another bag holding the same types."""
    donor = tmp_path / "donor.bag"
    with polybag.Writer(donor) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        ch = w.add_channel("/x", "ros1", s, {"md5sum": STRING_MD5})
        w.write(ch, s_bytes := struct.pack("<I", 0), 0)
    assert s_bytes
    with polybag.open(donor) as d:
        with polybag.open(build_v11(b"#ROSLOG V1.1\n"), format="bag", definitions=d) as r:
            defs = {c.topic: c.schema.data for c in r.summary.channels.values()}
    assert defs == {"/chatter": b"string data\n", "/count": b""}
    with polybag.open(build_v11(b"#ROSLOG V1.1\n"), format="bag", definitions={INT32_MD5: "int32 data\n"}) as r:
        defs = {c.topic: c.schema.data for c in r.summary.channels.values()}
    assert defs == {"/chatter": b"", "/count": b"int32 data\n"}


def test_v12_summary_from_the_index_without_scanning(monkeypatch):
    """rosbag-format-v1.x "Index Data" (version 0): counts and times per topic come from
    the index; definitions from the records the first entries point at."""
    from polybag.formats.bag import reader_v1

    data = build_v12(with_index=True)
    scans = {"n": 0}
    orig = reader_v1.scan_v12_records

    def counting(*args):
        scans["n"] += 1
        return orig(*args)

    monkeypatch.setattr(reader_v1, "scan_v12_records", counting)
    with polybag.open(data, format="bag") as r:
        s = r.summary
        info = r.info_extras()
        assert scans["n"] == 0
        assert s.indexed and s.message_count == 4
        assert (s.start_time, s.end_time) == (99 * 10**9 + 999_999_999, 101 * 10**9)
        chans = {c.topic: c for c in s.channels.values()}
        assert chans["/chatter"].schema.data == b"string data\n"
        assert chans["/count"].metadata["md5sum"] == INT32_MD5
        assert info["messages"] == 4
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
        assert scans["n"] == 1
        assert {m.channel.id for m in r.messages()} == set(s.channels)
    assert got == expected()
    # a lying index (count larger than its entries) is not trusted: the bag is scanned
    bad = data.replace(b"count=\x02\x00\x00\x00", b"count=\x09\x00\x00\x00", 1)
    with polybag.open(bad, format="bag") as r:
        assert not r.summary.indexed and r.summary.message_count == 4
