"""convert bag -> MCAP (and the writers under it) give the same bytes however the chunks are
packed: by this thread alone, by a worker thread, or by this thread while the workers are
busy; with the file pushed to disk in the background while it is written or not."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import pytest

import polybag
from polybag import ops
from polybag.formats.bag.writer import BagWriter
from polybag.formats.mcap.writer import McapWriter
from polybag.util import threads as _threads

IMAGE_DEF = "uint32 height\nuint32 width\nuint8[] data\n"


def _image_bag(path: Path, n: int = 40) -> None:
    """Large messages (two or three per 1 MiB MCAP chunk) and small ones in between."""
    with BagWriter(path, compression="none", chunk_size=1 << 20) as w:
        img = w.add_channel("/img", "ros1", w.add_schema("t/Image", "ros1msg", IMAGE_DEF), {"callerid": "/cam"})
        txt = w.add_channel("/txt", "ros1", w.add_schema("std_msgs/String", "ros1msg", "string data\n"))
        for i in range(n):
            size = 300_000 + 7_919 * i
            body = bytes((i * 31 + k) % 251 for k in range(251)) * (size // 251 + 1)
            w.write(img, struct.pack("<III", 480, 640, size) + body[:size], 10**9 + i * 10**7)
            s = f"frame {i}".encode()
            w.write(txt, struct.pack("<I", len(s)) + s, 10**9 + i * 10**7 + 1)


def _convert(src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, helpers: int, slow: float, every: int) -> bytes:
    monkeypatch.setattr(_threads, "helpers", lambda: helpers)
    real_pack = McapWriter._pack
    packed_by: set[str] = set()

    def pack(self: McapWriter, buf: bytearray, fill: int) -> tuple[int, bytes | None]:
        packed_by.add(threading.current_thread().name)
        if slow and threading.current_thread() is not threading.main_thread():
            time.sleep(slow)  # a busy worker: the next chunk is packed by the writing thread
        return real_pack(self, buf, fill)

    monkeypatch.setattr(McapWriter, "_pack", pack)
    real_wb = _threads.Writeback.__init__

    def wb_init(self: _threads.Writeback, file: object, every_: int = 0) -> None:
        real_wb(self, file, every)

    monkeypatch.setattr(_threads.Writeback, "__init__", wb_init)
    ops.convert(src, dst, compression="zstd", overwrite=True)
    monkeypatch.undo()
    if helpers and slow:
        assert "MainThread" in packed_by and len(packed_by) > 1  # both ways were taken
    return dst.read_bytes()


def test_convert_bytes_do_not_depend_on_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in.bag"
    _image_bag(src)
    one = _convert(src, tmp_path / "a.mcap", monkeypatch, 0, 0.0, 1 << 30)
    assert _convert(src, tmp_path / "b.mcap", monkeypatch, 1, 0.0, 1 << 30) == one
    assert _convert(src, tmp_path / "c.mcap", monkeypatch, 1, 0.05, 1 << 30) == one  # main thread helps
    assert _convert(src, tmp_path / "d.mcap", monkeypatch, 2, 0.02, 1 << 20) == one  # and syncs every MiB
    with polybag.open(tmp_path / "d.mcap") as r, polybag.open(src) as b:
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        assert got == [(m.topic, m.log_time, bytes(m.data)) for m in b.messages()]
        assert {c.topic: c.metadata.get("callerid") for c in r.summary.channels.values()}["/img"] == "/cam"


def test_bag_writer_main_thread_helps_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bag writer: chunks compressed by this thread while the worker is busy, the file
    synced in the background every few chunks: the bytes of the one-thread writer."""
    from polybag.formats.bag import writer as bw

    def write(p: Path, helpers: int, slow: float, every: int) -> bytes:
        monkeypatch.setattr(_threads, "helpers", lambda: helpers)
        real = bw.compress
        by: set[str] = set()

        def compress(name, data, level=None):  # type: ignore[no-untyped-def]
            by.add(threading.current_thread().name)
            if slow and threading.current_thread() is not threading.main_thread():
                time.sleep(slow)
            return real(name, data, level)

        monkeypatch.setattr(bw, "compress", compress)
        with BagWriter(p, compression="lz4", chunk_size=20_000) as w:
            w._writeback = _threads.Writeback(w._f, every)
            ch = w.add_channel("/a", "ros1", w.add_schema("std_msgs/String", "ros1msg", "string data\n"))
            for i in range(3000):
                s = f"message {i} " * (1 + i % 13)
                w.write(ch, struct.pack("<I", len(s)) + s.encode(), 10**9 + i * 1000)
        monkeypatch.undo()
        if helpers and slow:
            assert "MainThread" in by and len(by) > 1
        return p.read_bytes()

    one = write(tmp_path / "a.bag", 0, 0.0, 1 << 30)
    assert write(tmp_path / "b.bag", 1, 0.01, 1 << 30) == one
    assert write(tmp_path / "c.bag", 1, 0.0, 50_000) == one


def test_writeback_ignores_streams_and_waits(tmp_path: Path) -> None:
    import io

    wb = _threads.Writeback(io.BytesIO(), 1)
    wb.wrote(10)  # not a file: nothing to sync
    wb.wait()
    with open(tmp_path / "f", "wb") as f:
        wb = _threads.Writeback(f, 1)
        f.write(b"x" * 100)
        f.flush()
        wb.wrote(100)
        wb.wait()
