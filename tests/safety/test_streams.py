"""Issue 12 (trust), streams and the CLI's last edges.

* A bag, MCAP or ULog read from a pipe (``cat big.bag | polybag info -``) is spooled to an
  anonymous temporary file past 8 MiB (:meth:`polybag.io.source.StreamSource.spool`), so the
  command's memory does not grow with the stream: each command's peak anonymous RSS
  (sampled in the child) stays far under the stream's size.  What it reads is what the file gives.
* A short stream stays in memory and leaves no temporary file behind.
* ``cat --json`` of a topic whose definition cannot be used prints every message (payload
  in base64), warns once per topic on stderr and exits 1.
* ``info`` of a missing file is a one-line error, exit 3.
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import polybag
from polybag.cli import main
from polybag.io.source import SPOOL_MEMORY_LIMIT, StreamSource
from polybag.writer import Writer
from ulog_helpers import data, flags, fmt, header, sub

MiB = 1 << 20
STREAM_MB = 160  # each big stream: far above any bound below
PEAK = 100 * MiB  # the interpreter with numpy is ~25 MB anonymous; the stream in memory is > 160

# The child samples its own anonymous resident memory (RssAnon: what it allocated, not the
# file pages it maps, which the OS can drop at any time) every millisecond and writes the
# highest value when it exits.  A stream read into memory stays there for the whole command,
# so sampling cannot miss it.
_CHILD = """
import sys, threading, time
peak = [0]
def anon():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("RssAnon:")).split()[1])
def watch():
    while True:
        peak[0] = max(peak[0], anon())
        time.sleep(0.001)
threading.Thread(target=watch, daemon=True).start()
from polybag.cli import main
try:
    rc = main(sys.argv[2:])
finally:
    peak[0] = max(peak[0], anon())
    with open(sys.argv[1], "w") as f:
        f.write(str(peak[0]))
sys.exit(rc)
"""


def _run_piped(path: Path, *args: str) -> tuple[int, int, str, str]:
    """``cat PATH | polybag ARGS`` (the child reads a real pipe): exit code, the polybag
    process's peak anonymous RSS in bytes, stdout, stderr."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak RSS is read from /proc (Linux)")
    with tempfile.TemporaryDirectory() as d:
        peak_file = Path(d) / "peak"
        feeder = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
        try:
            p = subprocess.run(
                [sys.executable, "-c", _CHILD, str(peak_file), *args],
                stdin=feeder.stdout,
                capture_output=True,
                text=True,
            )
        finally:
            assert feeder.stdout is not None
            feeder.stdout.close()
            feeder.wait()
        peak = int(peak_file.read_text()) * 1024
    return p.returncode, peak, p.stdout, p.stderr


# --- big files, built with bounded memory ---------------------------------------------------
PAYLOAD = 60_000


def _payload(i: int) -> bytes:
    return struct.pack("<Q", 1_000_000 + i) + bytes([i % 251]) * (PAYLOAD - 8)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    """format -> (path, messages): about 160 MB each, one topic of 60 KB messages."""
    d = tmp_path_factory.mktemp("streams")
    n = STREAM_MB * MiB // PAYLOAD
    out: dict[str, tuple[Path, int]] = {}
    for name in ("big.bag", "big.mcap"):
        p = d / name
        w = Writer(str(p), compression="none")  # the stream's size is the file's
        if name.endswith(".bag"):
            s = w.add_schema("my_msgs/Blob", "ros1msg", b"uint64 t\nuint8[] data\n")
            ch = w.add_channel("/blob", "ros1", s)
        else:
            ch = w.add_channel("/blob", "x-blob", None)  # no codec: printed as a preview
        for i in range(n):
            p_ = _payload(i)
            body = p_[:8] + struct.pack("<I", len(p_) - 8) + p_[8:] if name.endswith(".bag") else p_
            w.write(ch, body, 1_000_000_000 + i * 1000)
        w.close()
        out[name.split(".")[1]] = (p, n)
    ulg = d / "big.ulg"
    with ulg.open("wb") as f:
        f.write(header() + flags() + fmt(f"blob:uint64_t timestamp;char[{PAYLOAD - 8}] b;") + sub(0, 0, "blob"))
        for i in range(n):
            f.write(data(0, _payload(i)))
    out["ulog"] = (ulg, n)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bag", "mcap", "ulog"])
def test_info_of_a_big_piped_stream_has_bounded_memory(big: dict[str, tuple[Path, int]], kind: str) -> None:
    path, n = big[kind]
    assert path.stat().st_size > STREAM_MB * MiB * 0.95
    rc, peak, out, err = _run_piped(path, "info", "--json", "--format", kind, "-")
    assert rc == 0, err
    d = json.loads(out)
    assert d["message_count"] == n
    assert peak < PEAK, f"info of a {STREAM_MB} MB {kind} stream: peak anonymous RSS {peak / MiB:.0f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bag", "mcap", "ulog"])
def test_cat_of_a_big_piped_stream_has_bounded_memory(big: dict[str, tuple[Path, int]], kind: str) -> None:
    path, n = big[kind]
    rc, peak, out, err = _run_piped(path, "cat", "--format", kind, "-")
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == n
    assert "/blob" in lines[-1] or "blob" in lines[-1]
    assert peak < PEAK, f"cat of a {STREAM_MB} MB {kind} stream: peak anonymous RSS {peak / MiB:.0f} MiB"


# --- the spool itself ------------------------------------------------------------------------
class _Chunky(io.RawIOBase):
    """A non-seekable stream that hands out at most 1000 bytes per read."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), 1000, len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


@pytest.mark.parametrize("size", [0, 1, 4096, SPOOL_MEMORY_LIMIT, SPOOL_MEMORY_LIMIT + 1, SPOOL_MEMORY_LIMIT + 3 * MiB + 7])
def test_spool_gives_back_exactly_the_stream(size: int) -> None:
    data = (bytes((i * 7) % 256 for i in range(4096)) * (size // 4096 + 1))[:size]
    s = StreamSource(_Chunky(data), "<pipe>")  # type: ignore[arg-type]
    head = s.read(min(size, 5))  # what a sniffer read
    assert head == data[: min(size, 5)]
    src = s.spool(b"HEAD")
    spool = src._spool
    try:
        assert bytes(src.view) == b"HEAD" + data[min(size, 5) :]
        # in memory up to the limit, a temporary file (unnamed) past it
        assert (spool is not None) == (size - min(size, 5) + 4 > SPOOL_MEMORY_LIMIT)
        if spool is not None:
            assert not os.path.exists(spool.name) if isinstance(spool.name, str) else True
    finally:
        src.close()
    if spool is not None:
        assert spool.closed  # closing the source frees the temporary file


def test_a_full_disk_while_spooling_is_a_polybag_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    class _Full:
        name = 3

        def __init__(self) -> None:
            self.closed = False
            self.n = 0

        def write(self, b: bytes) -> int:
            self.n += len(b)
            if self.n > SPOOL_MEMORY_LIMIT + 2 * MiB:
                raise OSError(errno.ENOSPC, "No space left on device")
            return len(b)

        def close(self) -> None:
            self.closed = True

    made: list[_Full] = []

    def fake(*a: object, **k: object) -> _Full:
        made.append(_Full())
        return made[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", fake)
    s = StreamSource(_Chunky(bytes(SPOOL_MEMORY_LIMIT + 5 * MiB)), "<stdin>")  # type: ignore[arg-type]
    with pytest.raises(polybag.PolybagError, match=r"<stdin>: cannot copy the stream to a temporary file .*No space"):
        s.spool()
    assert made and made[0].closed


def test_a_piped_small_file_reads_like_the_file(tmp_path: Path) -> None:
    p = tmp_path / "s.bag"
    w = Writer(str(p))
    s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
    ch = w.add_channel("/s", "ros1", s)
    for i in range(50):
        body = f"m{i}".encode()
        w.write(ch, struct.pack("<I", len(body)) + body, 1_000 + i)
    w.close()
    with p.open("rb") as fh, polybag.open(fh.raw if hasattr(fh, "raw") else fh) as r:
        from_file = [(m.log_time, bytes(m.data)) for m in r.messages()]
    feeder = subprocess.Popen(["cat", str(p)], stdout=subprocess.PIPE)
    assert feeder.stdout is not None
    with polybag.open(feeder.stdout, format="bag") as r:
        from_pipe = [(m.log_time, bytes(m.data)) for m in r.messages()]
    feeder.wait()
    assert from_pipe == from_file and len(from_pipe) == 50


# --- cat --json of an unusable definition -----------------------------------------------------
def test_cat_json_of_an_unusable_definition_prints_every_message_warns_once_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.bag"
    w = Writer(str(p))
    bad = w.add_schema("my/Bad", "ros1msg", b"int32 x\nint32 x\n")  # a repeated field name
    good = w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data\n")
    cb = w.add_channel("/bad", "ros1", bad)
    cg = w.add_channel("/good", "ros1", good)
    for i in range(5):
        w.write(cb, struct.pack("<ii", i, -i), 1_000 + 2 * i)
        w.write(cg, struct.pack("<i", i), 1_001 + 2 * i)
    w.close()
    rc = main(["cat", "--json", str(p)])
    cap = capsys.readouterr()
    assert rc == 1
    rows = [json.loads(line) for line in cap.out.splitlines()]
    assert len(rows) == 10
    bad_rows = [r for r in rows if r["topic"] == "/bad"]
    assert [base64.b64decode(r["data"]) for r in bad_rows] == [struct.pack("<ii", i, -i) for i in range(5)]
    assert [r["message"]["data"] for r in rows if r["topic"] == "/good"] == list(range(5))
    warnings = [line for line in cap.err.splitlines() if "warning" in line]
    assert len(warnings) == 1, cap.err
    assert warnings[0].startswith("polybag cat: warning: /bad: cannot decode")
    assert "base64" in warnings[0]


def test_cat_of_a_channel_without_a_codec_is_not_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "raw.mcap"
    w = Writer(str(p))
    ch = w.add_channel("/raw", "my-own-encoding", None)
    w.write(ch, b"\x01\x02", 5)
    w.close()
    assert main(["cat", "--json", str(p)]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["data"] == base64.b64encode(b"\x01\x02").decode()
    assert "warning" not in cap.err


def test_info_of_a_missing_file_is_one_line_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["info", str(tmp_path / "nope.bag")])
    err = capsys.readouterr().err
    assert rc == 3
    assert err.count("\n") == 1 and err.startswith("polybag info: error: ")
    assert "nope.bag" in err and "Traceback" not in err
