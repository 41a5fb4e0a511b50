"""Property tests against the official ``mcap`` library, both directions, streamed and indexed."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader
from mcap.writer import CompressionType, IndexType
from mcap.writer import Writer as LibWriter

from mcap_helpers import Pipe, Row, expected, key, to_bytes
from polybag.formats.mcap.reader import McapReader
from polybag.io.source import MappedSource, StreamSource


@st.composite
def layout_st(draw: Any) -> tuple[list[Any], list[Any]]:
    """A random number of schemas (0-3) and channels (1-6), each channel with a schema or none."""
    schemas = [(f"pkg/T{i}", draw(st.sampled_from(["jsonschema", "ros1msg", "protobuf"])), draw(st.binary(max_size=20))) for i in range(draw(st.integers(0, 3)))]
    n_ch = draw(st.integers(1, 6))
    channels = [
        (
            f"/t{i}",
            draw(st.one_of(st.none(), st.integers(0, len(schemas) - 1))) if schemas else None,
            draw(st.sampled_from(["json", "ros1", "raw", "cdr"])),
            draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)),
        )
        for i in range(n_ch)
    ]
    return schemas, channels


@st.composite
def case_st(draw: Any) -> tuple[list[Any], list[Any], list[Row], dict[str, Any]]:
    schemas, channels = draw(layout_st())
    topics = [c[0] for c in channels]
    rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from(topics),
                st.integers(0, 2_000),
                st.integers(0, 2**64 - 1),
                st.integers(0, 2**32 - 1),
                st.binary(max_size=60),
            ),
            max_size=60,
        )
    )
    f = draw(
        st.fixed_dictionaries(
            {
                "topics": st.one_of(st.none(), st.sets(st.sampled_from(topics), min_size=1)),
                "start": st.one_of(st.none(), st.integers(0, 2_000)),
                "end": st.one_of(st.none(), st.integers(0, 2_100)),
                "reverse": st.booleans(),
                "order": st.sampled_from(["log_time", "file"]),
            }
        )
    )
    return schemas, channels, rows, f


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _polybag_reads(data: bytes, rows: list[Row], f: dict[str, Any], topics_all: list[str]) -> None:
    for make in (lambda: McapReader(MappedSource(None, data)), lambda: McapReader(StreamSource(Pipe(data, 7)))):  # type: ignore[arg-type]
        reader = make()
        topics = sorted(f["topics"]) if f["topics"] is not None else None
        got = [
            key(m)
            for m in reader.messages(topics=topics, start=f["start"], end=f["end"], reverse=f["reverse"], order=f["order"])
        ]
        assert got == expected(rows, f["topics"], f["start"], f["end"], f["order"], f["reverse"])
        summary = make().summary
        seen = {c.topic for c in summary.channels.values()}
        assert {r[0] for r in rows} <= seen <= set(topics_all)
        counts = summary.topic_message_counts()
        for t in topics_all:
            assert counts.get(t, 0) == sum(1 for r in rows if r[0] == t)


def _lib_rows(reader: Any, **kw: Any) -> list[Row]:
    return [(c.topic, m.log_time, m.publish_time, m.sequence, bytes(m.data)) for _s, c, m in reader.iter_messages(**kw)]


@SETTINGS
@given(
    case=case_st(),
    compression=st.sampled_from(["none", "zstd", "lz4"]),
    chunk_size=st.sampled_from([1, 50, 400, 1 << 20]),
    chunked=st.booleans(),
    attachments=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8), st.binary(max_size=30), st.integers(0, 9), st.integers(0, 9)), max_size=2),
    metadata=st.lists(st.tuples(st.text(max_size=8), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)), max_size=2),
)
def test_polybag_written_read_by_mcap_and_polybag(
    case: Any, compression: str, chunk_size: int, chunked: bool, attachments: list[Any], metadata: list[Any]
) -> None:
    schemas, channels, rows, f = case
    data = to_bytes(
        rows, attachments=attachments, metadata=metadata, compression=compression, chunk_size=chunk_size, use_chunking=chunked,
        schemas=schemas, channels=channels,
    )  # fmt: skip
    # the official library: streamed (non-seekable) in file order, and indexed
    assert _lib_rows(make_reader(Pipe(data)), log_time_order=False) == rows
    seek = make_reader(io.BytesIO(data))
    assert _lib_rows(seek, log_time_order=False) == rows
    topics = sorted(f["topics"]) if f["topics"] is not None else None
    kw: dict[str, Any] = {"topics": topics}
    if f["start"] is not None:
        kw["starting_at"] = f["start"]
    if f["end"] is not None and (f["start"] is None or f["end"] >= f["start"]):
        kw["ending_before"] = f["end"]
    elif f["end"] is not None:
        kw["ending_before"] = f["start"]  # an empty window either way
    lib = _lib_rows(make_reader(io.BytesIO(data)), log_time_order=True, **kw)
    want = expected(rows, f["topics"], f["start"], f["end"])
    assert sorted(lib, key=lambda r: r[1]) == lib  # the library's order is by log time
    assert sorted(lib) == sorted(want)
    lib_att = [(a.name, a.media_type, a.data, a.log_time, a.create_time) for a in make_reader(io.BytesIO(data)).iter_attachments()]
    assert lib_att == [tuple(a) for a in attachments]
    assert [(m.name, m.metadata) for m in make_reader(io.BytesIO(data)).iter_metadata()] == [tuple(m) for m in metadata]
    _polybag_reads(data, rows, f, [c[0] for c in channels])
    r = McapReader(MappedSource(None, data))
    assert {(c.topic, c.schema.name if c.schema else None, c.message_encoding) for c in r.summary.channels.values()} == {
        (t, None if si is None else schemas[si][0], enc) for t, si, enc, _md in channels
    }
    assert [(a.name, a.media_type, a.data, a.log_time, a.create_time) for a in r.attachments()] == [tuple(a) for a in attachments]
    assert [(m.name, dict(m.metadata)) for m in r.metadata()] == [tuple(m) for m in metadata]


@SETTINGS
@given(
    case=case_st(),
    compression=st.sampled_from([CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4]),
    chunk_size=st.sampled_from([1, 50, 400, 1 << 20]),
    chunked=st.booleans(),
    summary=st.booleans(),
)
def test_mcap_written_read_by_polybag(
    case: Any, compression: CompressionType, chunk_size: int, chunked: bool, summary: bool
) -> None:
    schemas, channels, rows, f = case
    buf = io.BytesIO()
    w = LibWriter(
        buf,
        chunk_size=chunk_size,
        compression=compression,
        use_chunking=chunked,
        index_types=IndexType.ALL if summary else IndexType.NONE,
        repeat_channels=summary,
        repeat_schemas=summary,
        use_statistics=summary,
        use_summary_offsets=summary,
        enable_data_crcs=True,
    )
    w.start("lib-profile", "lib")
    sids = [w.register_schema(*sc) for sc in schemas]
    cids = {t: w.register_channel(t, enc, 0 if si is None else sids[si], {"x": t}) for t, si, enc, _md in channels}
    for topic, lt, pt, seq, data in rows:
        w.add_message(cids[topic], log_time=lt, data=data, publish_time=pt, sequence=seq)
    w.add_attachment(1, 2, "att", "text/plain", b"abc")
    w.add_metadata("meta", {"k": "v"})
    w.finish()
    data = buf.getvalue()
    _polybag_reads(data, rows, f, [c[0] for c in channels])
    r = McapReader(MappedSource(None, data))
    assert r.summary.profile == "lib-profile" and r.summary.library == "lib"
    assert [(a.name, a.data) for a in r.attachments()] == [("att", b"abc")]
    assert [(m.name, dict(m.metadata)) for m in r.metadata()] == [("meta", {"k": "v"})]
    chans = {c.topic: dict(c.metadata) for c in r.summary.channels.values()}
    assert all(md == {"x": t} for t, md in chans.items())
    # (the library drops the Channel records of a chunk that never receives a message)
    assert {row[0] for row in rows} <= set(chans)
