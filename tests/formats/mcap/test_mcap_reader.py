"""MCAP reading and writing: orders, filters, summaries, CRCs, spec corner cases."""

from __future__ import annotations

import io
import random
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import yaml

import polybag
from mcap_helpers import TOPICS, Pipe, Row, expected, key, to_bytes, write_file
from paths import CORPORA
from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError, WriteError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.reader import McapReader
from polybag.io.source import MappedSource, StreamSource


def make_rows(n: int, seed: int = 0, shuffle_times: bool = True) -> list[Row]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        t = 1000 + i * 10 + (rnd.randrange(-200, 200) if shuffle_times else 0)
        if rnd.random() < 0.1 and rows:
            t = rows[-1][1]  # ties
        rows.append((rnd.choice(TOPICS), t, t - 1, i, bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))))
    return rows


SUMMARY_OFF = dict(
    use_chunk_index=False,
    use_statistics=False,
    repeat_schemas=False,
    repeat_channels=False,
    use_summary_offsets=False,
    use_attachment_index=False,
    use_metadata_index=False,
)
VARIANTS = {
    "zstd": dict(compression="zstd", chunk_size=300),
    "lz4": dict(compression="lz4", chunk_size=500),
    "none": dict(compression="none", chunk_size=200),
    "unchunked": dict(use_chunking=False),
    "zstd-nosummary": dict(compression="zstd", chunk_size=300, **SUMMARY_OFF),
    "unchunked-nosummary": dict(use_chunking=False, **SUMMARY_OFF),
    "no-message-index": dict(compression="none", chunk_size=256, use_message_index=False),
}


def readers(data: bytes) -> dict[str, McapReader]:
    return {
        "mapped": McapReader(MappedSource(None, data)),
        "stream": McapReader(StreamSource(Pipe(data))),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("order", ["log_time", "file"])
@pytest.mark.parametrize("reverse", [False, True])
def test_orders_and_filters(variant: str, order: str, reverse: bool) -> None:
    rows = make_rows(300, seed=len(variant))
    data = to_bytes(rows, **VARIANTS[variant])
    cases = [
        dict(),
        dict(topics=["/a"]),
        dict(topics="/b/.*|/d"),
        dict(start=1500, end=2500),
        dict(topics=["/d"], start=1200),
        dict(end=1000),
        dict(start=10**12),
    ]
    for case in cases:
        for name, r in readers(data).items():
            got = [key(m) for m in r.messages(order=order, reverse=reverse, **case)]  # type: ignore[arg-type]
            topics = case.get("topics")
            tset = None
            if isinstance(topics, list):
                tset = set(topics)
            elif isinstance(topics, str):
                tset = {"/b/c", "/d"}
            want = expected(rows, tset, case.get("start"), case.get("end"), order, reverse)  # type: ignore[arg-type]
            assert got == want, (name, case)


def test_summary_from_index_and_scan() -> None:
    rows = make_rows(200, seed=3)
    att = [("a.txt", "text/plain", b"hello", 5, 6)]
    md = [("m", {"x": "1"})]
    full = to_bytes(rows, attachments=att, metadata=md, compression="zstd", chunk_size=400)
    bare = to_bytes(rows, attachments=att, metadata=md, compression="zstd", chunk_size=400, **SUMMARY_OFF)
    counts = {t: sum(1 for r in rows if r[0] == t) for t in TOPICS}
    for data, indexed in ((full, True), (bare, False)):
        with polybag.open(data) as r:
            s = r.summary
            assert s.indexed is indexed
            assert s.format == "mcap" and s.library.startswith("polybag")
            assert s.topic_message_counts() == counts
            assert s.start_time == min(r_[1] for r_ in rows)
            assert s.end_time == max(r_[1] for r_ in rows)
            assert s.chunk_count > 3 and all(c.compression == "zstd" for c in s.chunks)
            assert s.attachment_count == 1 and s.metadata_count == 1
            assert {c.type_name for c in s.channels.values()} == {"pkg/A", "pkg/B", ""}
            assert [(a.name, a.media_type, a.data, a.log_time, a.create_time) for a in r.attachments()] == [
                ("a.txt", "text/plain", b"hello", 5, 6)
            ]
            assert [(m.name, dict(m.metadata)) for m in r.metadata()] == [("m", {"x": "1"})]
        # also from a stream (the stream is read into memory for these)
        rs = McapReader(StreamSource(Pipe(data)))  # type: ignore[arg-type]
        assert rs.summary.topic_message_counts() == counts
        assert [a.name for a in rs.attachments()] == ["a.txt"]


def test_summary_never_reads_the_data_section(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = make_rows(100, seed=4)
    data = bytearray(to_bytes(rows, compression="zstd", chunk_size=200, attachments=[("x", "y", b"z", 0, 0)]))
    with polybag.open(bytes(data)) as r:
        footer_summary = r.footer.summary_start  # type: ignore[union-attr]
    # wipe the whole data section: a summary that reads it would fail
    for i in range(30, footer_summary - 10):
        data[i] = 0
    with polybag.open(bytes(data)) as r:
        s = r.summary
        assert s.indexed and s.message_count == 100
        assert len(s.chunks) == s.extras["statistics"]["chunk_count"]
        assert r.info_extras()["chunk_compression"] == {"zstd": len(s.chunks)}
        with pytest.raises(FormatError):
            list(r.messages())


def test_real_samples_match_rosbag2_metadata() -> None:
    for meta in sorted((CORPORA / "mcap-samples" / "rosbag2").glob("*/metadata.yaml")):
        info = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
        counts: dict[str, int] = {}
        total = 0
        for rel in info["relative_file_paths"]:
            path = meta.parent / Path(rel).name
            with polybag.open(path) as r:
                for t, n in r.summary.topic_message_counts().items():
                    counts[t] = counts.get(t, 0) + n
                msgs = list(r.messages())
                assert len(msgs) == r.summary.message_count
                assert [m.log_time for m in msgs] == sorted(m.log_time for m in msgs)
                total += len(msgs)
            with open(path, "rb") as f:
                streamed = [key(m) for m in McapReader(StreamSource(f)).messages()]  # type: ignore[arg-type]
            assert streamed == [key(m) for m in msgs]
        assert total == info["message_count"], meta
        for t in info["topics_with_message_count"]:
            assert counts.get(t["topic_metadata"]["name"], 0) == t["message_count"]


def test_lichtblick_sample() -> None:
    with polybag.open(CORPORA / "mcap-samples" / "lichtblick" / "example.mcap") as r:
        s = r.summary
        assert s.library == "MCAP web demo" and s.chunk_count == 2
        assert len(list(r.messages())) == s.message_count > 0


def test_real_pipe(tmp_path: Path) -> None:
    rows = make_rows(500, seed=5)
    p = tmp_path / "x.mcap"
    write_file(p, rows, chunk_size=1000)
    proc = subprocess.Popen(["cat", str(p)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with polybag.open(proc.stdout) as r:
        assert not r.seekable
        got = [key(m) for m in r.messages()]
    proc.wait()
    assert got == expected(rows)


def test_writer_active_file_and_rename(tmp_path: Path) -> None:
    p = tmp_path / "out.mcap"
    w = polybag.Writer(p, compression="lz4", chunk_size=64)
    s = w.add_schema("t", "ros1msg", b"int8 x")
    c = w.add_channel("/t", "ros1", s)
    for i in range(50):
        w.write(c, bytes([i]), log_time=i)
    assert (tmp_path / "out.mcap.active").exists() and not p.exists()
    w.close()
    assert p.exists() and not (tmp_path / "out.mcap.active").exists()
    with polybag.open(p) as r:
        assert [bytes(m.data)[0] for m in r.messages()] == list(range(50))
        assert [m.publish_time for m in r.messages()] == list(range(50))
    with pytest.raises(WriteError):
        w.write(c, b"x", log_time=1)


def test_writer_rejects_foreign_channels_and_bad_values() -> None:
    w = polybag.Writer(io.BytesIO(), format="mcap")
    c = w.add_channel("/t", "raw")
    with pytest.raises(WriteError):
        w.write(99, b"", log_time=0)
    with pytest.raises(WriteError):
        w.write(c, b"", log_time=-1)
    with pytest.raises(WriteError):
        w.add_channel("/u", "raw", polybag.Schema(5, "x", "y", b""))
    s = w.add_schema("a", "b", b"c")
    assert w.add_schema("a", "b", b"c") is s  # identical schemas are shared
    w.close()


def test_official_reader_reads_all_writer_options(tmp_path: Path) -> None:
    from mcap.reader import make_reader

    rows = make_rows(120, seed=9)
    for name, opts in VARIANTS.items():
        data = to_bytes(rows, attachments=[("f", "m", b"123", 1, 2)], metadata=[("md", {"a": "b"})], **opts)
        for stream in (io.BytesIO(data), Pipe(data)):
            r = make_reader(stream)
            got = [(c.topic, m.log_time, m.publish_time, m.sequence, m.data) for _s, c, m in r.iter_messages(log_time_order=False)]
            assert got == rows, name
        r = make_reader(io.BytesIO(data))
        assert [a.data for a in r.iter_attachments()] == [b"123"]
        assert [m.metadata for m in r.iter_metadata()] == [{"a": "b"}]


# --- CRCs --------------------------------------------------------------------------------------
def _flip_in_chunk_data(data: bytes) -> bytes:
    r = McapReader(MappedSource(None, data))
    ci = r.chunk_indexes[0]
    b = bytearray(data)
    b[ci.chunk_start_offset + ci.chunk_length - 3] ^= 0x40  # inside the (uncompressed) records
    return bytes(b)


def test_chunk_crc_mismatch_is_checksum_error() -> None:
    rows = [("/a", i, i, i, b"payload%d" % i) for i in range(20)]
    data = _flip_in_chunk_data(to_bytes(rows, compression="none", chunk_size=1 << 20))
    with pytest.raises(ChecksumError) as ei:
        list(polybag.open(data).messages())
    assert ei.value.offset is not None and "Chunk" in str(ei.value)
    got = list(polybag.open(data, validate_crcs=False).messages())
    assert len(got) == 20


def test_data_and_summary_crc() -> None:
    rows = [("/a", i, i, i, b"p") for i in range(5)]
    data = bytearray(to_bytes(rows, use_chunking=False))
    r = McapReader(MappedSource(None, bytes(data)))
    ss = r.footer.summary_start  # type: ignore[union-attr]
    # a flipped byte in a message payload: the DataEnd CRC catches it (streamed and scanned)
    first_msg = bytes(data).index(b"\x05\x17\x00\x00\x00\x00\x00\x00\x00")
    bad = bytearray(data)
    bad[first_msg + 9 + 22] ^= 1
    with pytest.raises(ChecksumError, match="data section"):
        list(McapReader(StreamSource(Pipe(bytes(bad)))).messages())  # type: ignore[arg-type]
    assert len(list(McapReader(StreamSource(Pipe(bytes(bad))), validate_crcs=False).messages())) == 5  # type: ignore[arg-type]
    # a flipped byte in the summary: the Footer CRC catches it
    bad = bytearray(data)
    bad[ss + 12] ^= 1
    r = polybag.open(bytes(bad))
    got = []
    with pytest.raises(ChecksumError, match="summary"):
        for m in r.messages():  # every message, found by a scan, then the error
            got.append(m)
    assert len(got) == 5
    with pytest.raises(ChecksumError, match="summary"):
        r.summary  # noqa: B018
    r = polybag.open(bytes(bad), validate_crcs=False)  # the damaged summary is ignored
    assert len(list(r.messages())) == 5 and not r.summary.indexed
    assert "summary_error" in r.summary.extras


def test_attachment_crc() -> None:
    data = bytearray(to_bytes([], attachments=[("f", "m", b"abcdef", 1, 2)]))
    i = bytes(data).index(b"abcdef")
    data[i] ^= 1
    with pytest.raises(ChecksumError, match="Attachment"):
        list(polybag.open(bytes(data)).attachments())
    assert [a.data for a in polybag.open(bytes(data), validate_crcs=False).attachments()] == [b"`bcdef"]


# --- spec corner cases ---------------------------------------------------------------------------
def _file(*records: bytes, footer: bool = True) -> bytes:
    out = R.MAGIC + R.encode(R.Header("p", "l")) + b"".join(records)
    if footer:
        out += R.encode(R.DataEnd(0)) + R.encode(R.Footer(0, 0, 0)) + R.MAGIC
    return out


def test_unknown_opcodes_extra_and_missing_fields() -> None:
    schema = R.frame(R.Opcode.SCHEMA, R.SchemaRecord(1, "S", "enc", b"d").body() + b"future-field")
    # a channel whose record ends before its metadata map: metadata reads as {}
    chan_body = R.U16.pack(1) + R.U16.pack(1) + b"\x02\x00\x00\x00/t" + b"\x01\x00\x00\x00e"
    chan = R.frame(R.Opcode.CHANNEL, chan_body)
    msg = R.encode(R.MessageRecord(1, 7, 10, 9, b"xy"))
    unknown = R.frame(0x80, b"vendor stuff") + R.frame(0x20, b"")
    chunk_records = unknown + R.encode(R.MessageRecord(1, 8, 11, 11, b"z"))
    chunk = R.encode(R.Chunk(11, 11, len(chunk_records), zlib.crc32(chunk_records), "", chunk_records))
    data = _file(schema, unknown, chan, msg, chunk)
    for r in (McapReader(MappedSource(None, data)), McapReader(StreamSource(Pipe(data)))):  # type: ignore[arg-type]
        msgs = list(r.messages())
        assert [(m.sequence, m.log_time, bytes(m.data)) for m in msgs] == [(7, 10, b"xy"), (8, 11, b"z")]
        ch = msgs[0].channel
        assert ch.topic == "/t" and ch.message_encoding == "e" and dict(ch.metadata) == {}
        assert ch.schema is not None and ch.schema.data == b"d"
    recs = list(McapReader(StreamSource(Pipe(data))).records())  # type: ignore[arg-type]
    assert sum(isinstance(x, R.UnknownRecord) for x in recs) == 4


def test_missing_trailing_fields_read_as_zero() -> None:
    # a Statistics record cut after message_count
    c = R.Cursor(R.U64.pack(42), 0, 8, None, 0, "Statistics")
    st = R.Statistics.read(c)
    assert st.message_count == 42 and st.chunk_count == 0 and st.channel_message_counts == {}
    # a message record shorter than its fixed head
    data = _file(R.encode(R.ChannelRecord(1, 0, "/t", "raw", {})), R.frame(R.Opcode.MESSAGE, R.U16.pack(1) + R.U32.pack(3)))
    msgs = list(polybag.open(data).messages())
    assert [(m.channel.topic, m.sequence, m.log_time, bytes(m.data)) for m in msgs] == [("/t", 3, 0, b"")]


def test_lying_lengths_are_errors_not_allocations() -> None:
    chan = R.encode(R.ChannelRecord(1, 0, "/t", "raw", {}))
    # a message record claiming 2**62 bytes
    huge = R.RECORD_HEAD.pack(5, 1 << 62) + b"\x01\x00" + bytes(20)
    with pytest.raises(TruncatedError):
        list(polybag.open(_file(chan, huge, footer=False)).messages())
    # a chunk whose uncompressed size is a lie
    recs = R.encode(R.MessageRecord(1, 0, 1, 1, b"abc"))
    import zstandard

    comp = zstandard.ZstdCompressor().compress(recs)
    for usize in (1 << 60, 3, len(recs) + 1):
        chunk = R.encode(R.Chunk(1, 1, usize, 0, "zstd", comp))
        with pytest.raises(FormatError):
            list(polybag.open(_file(chan, chunk)).messages())
    # a string length that points past its record
    bad_schema = R.frame(R.Opcode.SCHEMA, R.U16.pack(1) + struct.pack("<I", 1 << 31) + b"x")
    with pytest.raises(FormatError):
        list(polybag.open(_file(bad_schema)).messages())


def test_not_mcap_and_truncated_header() -> None:
    with pytest.raises(PolybagError):
        McapReader(MappedSource(None, b"\x89MCAP"))
    with pytest.raises(FormatError):
        McapReader(MappedSource(None, b"hello world, not mcap"))
    with pytest.raises(TruncatedError):
        list(polybag.open(R.MAGIC + R.encode(R.Header("", ""))).messages())


def test_channel_defined_in_an_earlier_chunk_is_found_out_of_order() -> None:
    # chunk 1 (late times) defines the channel; chunk 2 (early times) only uses it.
    # No summary: the log-time merge loads chunk 2 first and must find the channel.
    chan = R.encode(R.ChannelRecord(1, 0, "/t", "raw", {}))
    c1 = chan + R.encode(R.MessageRecord(1, 0, 100, 100, b"late"))
    c2 = R.encode(R.MessageRecord(1, 1, 5, 5, b"early"))
    chunks = [R.encode(R.Chunk(t, t, len(c), zlib.crc32(c), "", c)) for c, t in ((c1, 100), (c2, 5))]
    data = _file(*chunks)
    assert [bytes(m.data) for m in polybag.open(data).messages()] == [b"early", b"late"]
    assert [bytes(m.data) for m in polybag.open(data).messages(order="file")] == [b"late", b"early"]
    assert [bytes(m.data) for m in polybag.open(data).messages(topics="/t", reverse=True)] == [b"late", b"early"]


def test_time_bounds_at_the_edges_of_u64() -> None:
    top = 2**64 - 1
    data = to_bytes([("/a", top, 0, 0, b"x"), ("/a", 0, 0, 1, b"y")])
    for r in readers(data).values():
        assert [m.log_time for m in r.messages(end=2**64)] == [0, top]
    r = polybag.open(data)
    assert [m.log_time for m in r.messages(start=-5, end=1)] == [0]
    assert [m.log_time for m in r.messages(end=0)] == []
    assert [m.log_time for m in r.messages(start=top)] == [top]
    with pytest.raises(ValueError):
        r.messages(order="sideways")


def test_stream_definitions_between_indexed_messages() -> None:
    buf = io.BytesIO()
    w = polybag.Writer(buf, format="mcap", chunk_size=1, compression="zstd")
    a = w.add_channel("/a", "raw")
    b = w.add_channel("/b", "raw")  # defined in chunk 1, first used in chunk 2
    w.write(a, b"1", log_time=1)
    w.write(b, b"2", log_time=2)
    w.close()
    data = buf.getvalue()
    for r in readers(data).values():
        assert [(m.topic, bytes(m.data)) for m in r.messages(order="file")] == [("/a", b"1"), ("/b", b"2")]


def test_incomplete_message_index_is_noticed() -> None:
    rows = [(TOPICS[i % 3], i, i, i, b"m%d" % i) for i in range(30)]
    data = bytearray(to_bytes(rows, compression="none", chunk_size=1 << 20))
    r = McapReader(MappedSource(None, bytes(data)))
    ci = r.chunk_indexes[0]
    victim = ci.message_index_offsets[min(ci.message_index_offsets)]
    assert data[victim] == R.Opcode.MESSAGE_INDEX
    data[victim] = 0x80  # the record becomes an unknown one: its channel has no index
    for rd in (
        McapReader(MappedSource(None, bytes(data)), validate_crcs=False),
        McapReader(StreamSource(Pipe(bytes(data))), validate_crcs=False),  # type: ignore[arg-type]
    ):
        assert [key(m) for m in rd.messages(order="file")] == rows
