"""The MCAP writer's pipelined chunks (checksummed, compressed and written by a worker
thread while the next chunk fills) give exactly the bytes of the one-thread writer."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.formats.mcap.writer import McapWriter


def _write(ops: list[tuple[str, int, int]], pipeline: bool, compression: str, chunk_size: int) -> bytes:
    out = io.BytesIO()
    w = McapWriter(out, compression=compression, chunk_size=chunk_size)
    w._pipeline = pipeline
    sch = w.add_schema("t/T", "ros1msg", "uint8[] data")
    chans = [w.add_channel(f"/t{i}", "ros1", sch) for i in range(3)]
    for kind, a, b in ops:
        if kind == "msg":
            w.write(chans[a % 3], bytes([a % 251]) * b, 1000 + a * 7 + b)
        elif kind == "att":
            w.add_attachment(f"a{a}", "application/octet-stream", b"x" * b, log_time=a)
        else:
            w.add_metadata(f"m{a}", {"k": str(b)})
    w.close()
    return out.getvalue()


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("msg"), st.integers(0, 1000), st.sampled_from([0, 1, 50, 3000, 70000, 200000])),
        st.tuples(st.just("att"), st.integers(0, 100), st.integers(0, 5000)),
        st.tuples(st.just("meta"), st.integers(0, 100), st.integers(0, 100)),
    ),
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, compression=st.sampled_from(["zstd", "lz4", "none"]), chunk=st.sampled_from([1, 4096, 1 << 20]))
def test_pipelined_bytes_equal_one_thread(ops: list[tuple[str, int, int]], compression: str, chunk: int) -> None:
    a = _write(ops, True, compression, chunk)
    b = _write(ops, False, compression, chunk)
    assert a == b
    n = sum(1 for k, _, _ in ops if k == "msg")
    with polybag.open(a) as r:
        assert sum(r.summary.message_counts.values()) == n
        assert len(list(r.messages(order="file"))) == n


def test_large_messages_reuse_buffers_without_mixing_chunks() -> None:
    """Kept buffers alternate between the filling chunk and the one in flight."""
    payloads = [bytes([i % 256]) * (100_000 + i) for i in range(60)]
    out = io.BytesIO()
    with McapWriter(out, chunk_size=250_000) as w:
        w._pipeline = True
        ch = w.add_channel("/img", "ros1", w.add_schema("s/I", "ros1msg", "uint8[] d"))
        for i, p in enumerate(payloads):
            w.write(ch, p, i)
    with polybag.open(out.getvalue()) as r:
        assert len(r.summary.chunks) >= 20
        got = [bytes(m.data) for m in r.messages()]
    assert got == payloads


def test_a_failing_chunk_surfaces_and_leaves_the_active_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    calls = {"n": 0}
    real = McapWriter._compress

    def flaky(self: McapWriter, raw: memoryview) -> bytes | memoryview:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(self, raw)

    monkeypatch.setattr(McapWriter, "_compress", flaky)
    path = tmp_path / "x.mcap"
    w = McapWriter(path, chunk_size=1000)
    w._pipeline = True
    ch = w.add_channel("/a", "json", w.add_schema("s", "jsonschema", "{}"))
    with pytest.raises(OSError, match="No space left"):
        for i in range(100):
            w.write(ch, b"{}" * 300, i)
        w.close()
    assert not path.exists()
    assert (tmp_path / "x.mcap.active").exists()
