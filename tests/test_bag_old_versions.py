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
from polybag.errors import PolybagError, TruncatedError

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
INT32_MD5 = "da5909fbe378aeaf85e547e830cc1bb7"


def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<I", len(b)) + b


# (topic, md5, type, sec, nsec, data); payloads contain newlines and NULs on purpose
MSGS = [
    ("/chatter", STRING_MD5, "std_msgs/String", 100, 5, s("hello\nworld")),
    ("/count", INT32_MD5, "std_msgs/Int32", 100, 7, struct.pack("<i", 10)),
    ("/chatter", STRING_MD5, "std_msgs/String", 101, 0, s("\x00\n\n")),
    ("/count", INT32_MD5, "std_msgs/Int32", 99, 999_999_999, struct.pack("<i", -1)),  # out of order
]


def expected(msgs=MSGS):
    return [(t, sec * 10**9 + ns, d) for t, _m, _ty, sec, ns, d in msgs]


def line_record(topic, md5, typ, sec, nsec, data) -> bytes:
    """rosbag-format-v1.x "Version 1.1": topic, md5sum, type newline-terminated; then
    time_sec, time_nsec, length (little-endian 4 bytes each) and the data."""
    return f"{topic}\n{md5}\n{typ}\n".encode() + struct.pack("<III", sec, nsec, len(data)) + data


def build_v11(magic: bytes) -> bytes:
    return magic + b"".join(line_record(*m) for m in MSGS)


def build_roslog_v10() -> bytes:
    """rosbag-versions-overview "Version 1.0": '#ROSLOG V1.0', quantity, then quantity x
    (topic_name, md5sum, datatype), then per message topic_name, time.sec, time.nsec,
    length, MSGDATA."""
    topics = {}
    for t, m, ty, *_ in MSGS:
        topics[t] = (m, ty)
    out = b"#ROSLOG V1.0\n" + f"{len(topics)}\n".encode()
    for t, (m, ty) in topics.items():
        out += f"{t}\n{m}\n{ty}\n".encode()
    for t, _m, _ty, sec, ns, d in MSGS:
        out += f"{t}\n".encode() + struct.pack("<III", sec, ns, len(d)) + d
    return out


def field(name: str, value: bytes) -> bytes:
    """rosbag-format-v1.x "Header format": <field_len><name>=<value>."""
    body = name.encode() + b"=" + value
    return struct.pack("<I", len(body)) + body


def record(fields: list[bytes], data: bytes = b"") -> bytes:
    """rosbag-format-v1.x "Format" (1.2): <header_len><header><data_len><data>."""
    h = b"".join(fields)
    return struct.pack("<I", len(h)) + h + struct.pack("<I", len(data)) + data


DEFS = {"std_msgs/String": b"string data\n", "std_msgs/Int32": b"int32 data\n"}


def build_v12(*, with_index: bool, time_field: bool = False) -> bytes:
    """rosbag-format-v1.x "Version 1.2": op 0x03 bag header (index_pos, padded with spaces
    to 4096 bytes), op 0x01 message definition once per topic before its data, op 0x02
    message data (topic, md5, type, sec, nsec), op 0x04 index data ver 0 per topic."""
    magic = b"#ROSRECORD V1.2\n"

    def header(index_pos: int) -> bytes:
        fields = [field("op", b"\x03"), field("index_pos", struct.pack("<Q", index_pos))]
        hl = sum(len(f) for f in fields)
        pad = 4096 - 8 - hl
        return record(fields, b" " * pad)

    body = b""
    pos0 = len(magic) + 4096
    seen = set()
    positions: dict[str, list[tuple[int, int, int]]] = {}
    for topic, md5, typ, sec, ns, data in MSGS:
        if topic not in seen:
            seen.add(topic)
            first = pos0 + len(body)
            body += record(
                [field("op", b"\x01"), field("topic", topic.encode()), field("md5", md5.encode()),
                 field("type", typ.encode()), field("def", DEFS[typ])]
            )
        else:
            first = None
        p = pos0 + len(body)
        tf = [field("time", struct.pack("<II", sec, ns))] if time_field else [
            field("sec", struct.pack("<I", sec)), field("nsec", struct.pack("<I", ns))]
        body += record(
            [field("op", b"\x02"), field("topic", topic.encode()), field("md5", md5.encode()),
             field("type", typ.encode()), *tf],
            data,
        )
        positions.setdefault(topic, []).append((sec, ns, first if first is not None else p))
    index = b""
    if with_index:
        for topic, entries in positions.items():
            typ = next(m[2] for m in MSGS if m[0] == topic)
            index += record(
                [field("op", b"\x04"), field("ver", struct.pack("<I", 0)), field("topic", topic.encode()),
                 field("type", typ.encode()), field("count", struct.pack("<I", len(entries)))],
                b"".join(struct.pack("<IIQ", a, b, c) for a, b, c in entries),
            )
    index_pos = pos0 + len(body) if with_index else 0
    return magic + header(index_pos) + body + index


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
    from polybag.formats.bag.reader_v1 import BagV12Reader

    data = build_v12(with_index=True)
    scans = {"n": 0}
    orig = BagV12Reader._scan

    def counting(self, pos):
        scans["n"] += 1
        return orig(self, pos)

    monkeypatch.setattr(BagV12Reader, "_scan", counting)
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
