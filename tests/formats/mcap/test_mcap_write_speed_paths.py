"""The MCAP writer's and reader's CRC-32 (``polybag.io.compression.crc32``: ISA-L's when
``isal`` is installed) gives zlib's values, so the files are byte for byte the ones zlib's
CRC wrote, and the `mcap` library validates every CRC in them.  Also: a fresh ``polybag``
command (a bag -> MCAP convert) gets OpenBLAS's short spin (``polybag/cli/__init__.py``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zlib
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader

import polybag
from bag_helpers import write_sample
from polybag.errors import ChecksumError
from polybag.formats.mcap import writer_chunks
from polybag.formats.mcap.writer import McapWriter
from polybag.io import compression


def test_fast_crc_is_installed() -> None:
    """isal is a dependency: the CRC is ISA-L's, not zlib's."""
    pytest.importorskip("isal")
    assert compression.crc32 is not zlib.crc32
    assert writer_chunks._crc32 is compression.crc32


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=20_000),
    value=st.integers(0, 2**32 - 1),
    cut=st.integers(0, 20_000),
    kind=st.sampled_from(["bytes", "bytearray", "memoryview"]),
)
def test_crc32_is_zlibs(data: bytes, value: int, cut: int, kind: str) -> None:
    buf: Any = {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data)}[kind]
    assert compression.crc32(buf) == zlib.crc32(data)
    assert compression.crc32(buf, value) == zlib.crc32(data, value)
    cut = min(cut, len(data))
    # a running CRC over two pieces (the data section's CRC as the writer keeps it)
    assert compression.crc32(buf[cut:], compression.crc32(buf[:cut])) == zlib.crc32(data)


def test_crc32_large_buffer() -> None:
    data = bytes(range(256)) * 40_000 + b"tail"  # ~10 MB: the implementations' wide paths
    view = memoryview(data)[3:]
    assert compression.crc32(view) == zlib.crc32(view)
    assert compression.crc32(view, 0xDEADBEEF) == zlib.crc32(view, 0xDEADBEEF)


def _write(rows: list[tuple[int, int, bytes]], comp: str, chunk_size: int) -> bytes:
    f = io.BytesIO()
    with McapWriter(f, compression=comp, chunk_size=chunk_size, profile="", library="t") as w:
        sid = w.add_schema("pkg/M", "jsonschema", b"{}").id
        chans = [w.add_channel(f"/t{i}", "json", sid) for i in range(3)]
        for k, t, data in rows:
            w.write(chans[k], data, t)
        w.add_attachment("a.bin", "application/octet-stream", b"attached" * 100, 5, 6)
        w.add_metadata("m", {"k": "v"})
    return f.getvalue()


rows_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2**63), st.binary(max_size=3000)), max_size=60
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, comp=st.sampled_from(["zstd", "lz4", "none"]), chunk_size=st.sampled_from([1, 500, 4096, 1 << 20]))
def test_same_bytes_as_zlib_crc(rows: list[tuple[int, int, bytes]], comp: str, chunk_size: int) -> None:
    fast = _write(rows, comp, chunk_size)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writer_chunks, "_crc32", zlib.crc32)
        mp.setattr(compression, "crc32", zlib.crc32)
        slow = _write(rows, comp, chunk_size)
    assert fast == slow
    # the `mcap` library checks the chunk, data-section, summary and attachment CRCs
    reader = make_reader(io.BytesIO(fast), validate_crcs=True)
    got = [(c.topic, m.log_time, bytes(m.data)) for _s, c, m in reader.iter_messages(log_time_order=False)]
    assert got == [(f"/t{k}", t, d) for k, t, d in rows]
    assert [a.data for a in reader.iter_attachments()] == [b"attached" * 100]


def test_reader_chunk_crc_still_checked() -> None:
    rows = [(0, i, b"payload %d" % i) for i in range(50)]
    data = bytearray(_write(rows, "none", 1 << 20))
    i = bytes(data).index(b"payload 17")
    data[i + 3] ^= 0x20
    with pytest.raises(ChecksumError, match="Chunk"):
        list(polybag.open(bytes(data)).messages())
    assert len(list(polybag.open(bytes(data), validate_crcs=False).messages())) == 50


#: a fresh process running one ``polybag`` command in-process; it prints the command's exit
#: status and OPENBLAS_THREAD_TIMEOUT as it was when numpy was first imported (OpenBLAS reads
#: it then, once), or "unimported"
_COMMAND = """
import os, sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not seen:
            seen.append(str(os.environ.get("OPENBLAS_THREAD_TIMEOUT")))
        return None
sys.meta_path.insert(0, Watch())
from polybag.cli import main
rc = main(sys.argv[1:])
print(rc, seen[0] if seen else "unimported")
"""


def _blas_timeout(env: dict[str, str], args: list[str]) -> str:
    full = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", _COMMAND, *args], env=full, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_openblas_spin_is_short_in_a_fresh_command(tmp_path: Path) -> None:
    """A fresh ``polybag convert`` of a bag loads numpy's OpenBLAS with the short spin; a value
    the user set wins; a library import (``import polybag, numpy``) is left alone
    (``tests/test_package_root.py``: importing polybag sets no environment variable)."""
    bag = tmp_path / "in.bag"
    write_sample(bag, n=30)
    first = ["convert", str(bag), str(tmp_path / "a.mcap"), "-q"]
    assert _blas_timeout({}, first) == "0 12"
    again = ["convert", str(bag), str(tmp_path / "b.mcap"), "-q"]
    assert _blas_timeout({"OPENBLAS_THREAD_TIMEOUT": "25"}, again) == "0 25"
    assert polybag.open(str(tmp_path / "a.mcap")).summary.message_count == 30


class _StalledFuture(Future):  # type: ignore[type-arg]
    """A worker's chunk that is not packed until the test says so; waiting for it is an error."""

    def result(self, timeout: float | None = None) -> Any:
        if not self.done():
            raise AssertionError("the writer waited for the stalled worker's chunk")
        return super().result(timeout)


class _StalledPool:
    def __init__(self) -> None:
        self.jobs: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        f: Future[Any] = _StalledFuture()
        self.jobs.append((f, fn, args))
        return f

    def release(self) -> None:
        for f, fn, args in self.jobs:
            if not f.done():
                f.set_result(fn(*args))


def _chunks(w: McapWriter, ch: Any, n_chunks: int, first: int = 0) -> None:
    for i in range(first * 2, (first + n_chunks) * 2):  # two 600-byte messages close a 1000-byte chunk
        w.write(ch, bytes([i % 256]) * 600, i)


def test_a_stalled_worker_does_not_stall_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the worker's chunk waits (its thread kept off the cores by other processes),
    the writing thread packs the next chunks itself and queues them (up to QUEUE_CHUNKS),
    instead of waiting; the file is byte for byte the one-thread writer's."""
    from polybag.util import threads as _threads

    def write(pool: _StalledPool | None, helpers: int) -> bytes:
        monkeypatch.setattr(_threads, "helpers", lambda: helpers)
        if pool is not None:
            monkeypatch.setattr(_threads, "pool", lambda: pool)
        f = io.BytesIO()
        w = McapWriter(f, compression="zstd", chunk_size=1000, library="t")
        ch = w.add_channel("/a", "json", w.add_schema("s", "jsonschema", b"{}").id)
        _chunks(w, ch, _threads.QUEUE_CHUNKS - 1)  # every chunk after the worker's is queued
        if pool is not None:
            assert len(pool.jobs) == 1 and len(w._inflight) == _threads.QUEUE_CHUNKS - 1
            pool.release()
        _chunks(w, ch, 5, _threads.QUEUE_CHUNKS - 1)
        if pool is not None:
            pool.release()
        w.close()
        return f.getvalue()

    assert write(_StalledPool(), 1) == write(None, 0)


def test_the_queue_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from polybag.util import threads as _threads

    pool = _StalledPool()
    monkeypatch.setattr(_threads, "helpers", lambda: 1)
    monkeypatch.setattr(_threads, "pool", lambda: pool)
    w = McapWriter(io.BytesIO(), compression="zstd", chunk_size=1000, library="t")
    ch = w.add_channel("/a", "json", w.add_schema("s", "jsonschema", b"{}").id)
    _chunks(w, ch, _threads.QUEUE_CHUNKS)
    with pytest.raises(AssertionError, match="waited for the stalled"):
        _chunks(w, ch, 1, _threads.QUEUE_CHUNKS)  # one more: the writer waits for the oldest
    assert _threads.keep_in_flight(1, _threads.QUEUE_BYTES + 1) == 2  # and less when they are large
    pool.release()
    w.abort(discard=True)
