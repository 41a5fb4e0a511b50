"""Decompression bombs (issue 12): memory never depends on what a file declares.

* a chunk that declares 1,000 bytes but holds a zstd frame expanding to 2 GiB stops at the
  declared size (the frame's own content size is checked first: python-zstandard would
  allocate what it states);
* one cap on what any single chunk may expand to (512 MiB by default;
  ``polybag.open(..., max_chunk_bytes=)``, ``polybag --max-chunk SIZE``): honest but absurd
  chunks (1 GiB zstd in MCAP, 1 GiB bz2 in a bag) are a clear error naming the file, the
  offset and the option, before anything is decompressed;
* a large chunk under the cap costs about its size once (no pieces joined into a copy);
* ``info`` of a file with a summary or an index decompresses no chunk.

The bomb files are built here by streaming compression (a few KB on disk; the test process
never holds the expanded data).  Peak memory of ``info``/``cat``/``check`` is measured in a
child process per command, which reports the high-water mark of its own RSS (VmHWM).
"""

from __future__ import annotations

import bz2
import struct
import subprocess
import sys
import tempfile
import tracemalloc
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import polybag
from mcap_helpers import Pipe, to_bytes
from paths import CORPORA
from polybag.cli import build_parser, main
from polybag.errors import FormatError, UsageError
from polybag.formats.bag import chunks as bag_chunks
from polybag.formats.bag import lz4fast
from polybag.formats.bag.records import TIME, U32, build_header
from polybag.formats.bag.writer import BagWriter, connection_record
from polybag.formats.mcap import records as R
from polybag.io import compression
from polybag.io.compression import ChunkLimitError

MiB = 1 << 20
GiB = 1 << 30
HINT = "(raise it with --max-chunk / max_chunk_bytes="
OVER_DEFAULT = "over the 536870912-byte limit (raise it with --max-chunk / max_chunk_bytes=)"
# bounds on the peak RSS of one `polybag` command (the interpreter with numpy is ~45 MB): the
# issue's targets are 400 MB for the lying frame and 700 MB for the 1 GiB chunks
SMALL_PEAK = 200 * MiB


# --- building bombs with bounded memory ---------------------------------------------------------
def _zeros(n: int) -> Iterator[bytes]:
    piece = bytes(MiB)
    while n > 0:
        k = min(n, MiB)
        yield piece if k == MiB else bytes(k)
        n -= k


def _compressed(comp: str, pieces: Iterable[bytes], size: int, *, state_size: bool = True) -> bytes:
    """One frame/stream of ``pieces`` (``size`` bytes in all), compressed piece by piece."""
    if comp == "zstd":
        co = zstandard.ZstdCompressor(level=1).compressobj(size=size if state_size else -1)
        out = [co.compress(p) for p in pieces]
        out.append(co.flush())
    elif comp == "lz4":
        c = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True, block_linked=False
        )
        out = [c.begin(), *(c.compress(p) for p in pieces), c.flush()]
    else:
        b = bz2.BZ2Compressor(9)
        out = [b.compress(p) for p in pieces]
        out.append(b.flush())
    return b"".join(out)


def _crc(pieces: Iterable[bytes]) -> int:
    c = 0
    for p in pieces:
        c = zlib.crc32(p, c)
    return c


def _mcap_message(payload: int) -> Iterator[bytes]:
    """One MCAP Message record (channel 1, times 1) whose data is ``payload`` zero bytes."""
    yield R.RECORD_HEAD.pack(R.Opcode.MESSAGE, 22 + payload) + struct.pack("<HIQQ", 1, 0, 1, 1)
    yield from _zeros(payload)


def _mcap(path: Path, comp: str, data: bytes, usize: int, crc: int, *, summary: bool) -> int:
    """An MCAP file with one chunk (``data``, declaring ``usize`` bytes) on a schemaless raw
    channel ``/bomb``; with ``summary`` the summary holds the channel, statistics and the
    chunk index.  Returns the chunk record's offset."""
    ch = R.ChannelRecord(1, 0, "/bomb", "raw", {})
    out = bytearray(R.MAGIC + R.encode(R.Header("", "bombs")) + R.encode(ch))
    coff = len(out)
    out += R.encode(R.Chunk(1, 1, usize, crc, comp, data))
    clen = len(out) - coff
    mi = len(out)
    out += R.encode(R.MessageIndex(1, [(1, 0)]))
    milen = len(out) - mi
    out += R.encode(R.DataEnd(0))
    start = 0
    if summary:
        start = len(out)
        out += R.encode(ch)
        out += R.encode(R.Statistics(1, 0, 1, 0, 0, 1, 1, 1, {1: 1}))
        out += R.encode(R.ChunkIndex(1, 1, coff, clen, {1: mi}, milen, comp, len(data), usize))
    out += R.encode(R.Footer(start, 0, 0)) + R.MAGIC
    path.write_bytes(out)
    return coff


def _bag(path: Path, comp: str, size: int, *, indexed: bool = True) -> int:
    """A bag with one ``comp`` chunk of ``size`` uncompressed bytes (honest): a connection
    record and one message of zero bytes.  Without ``indexed`` the index is cut off and
    the header's index_pos is 0 (a recording killed before its index).  Returns the
    chunk's offset."""
    fields = {"topic": b"/bomb", "type": b"pkg/Blob", "md5sum": b"*", "message_definition": b"uint8[] data\n"}
    conn = connection_record(0, "/bomb", fields)
    head = build_header({"op": b"\x02", "conn": U32.pack(0), "time": TIME.pack(1, 0)})
    payload = size - len(conn) - 8 - len(head)
    msg = U32.pack(len(head)) + head + U32.pack(payload)

    def pieces() -> Iterator[bytes]:
        yield conn
        yield msg
        yield from _zeros(payload)

    data = _compressed(comp, pieces(), size)
    with BagWriter(path, compression=comp) as w:
        w.add_connection(0, "/bomb", fields, in_chunks=True)
        w.write_chunk(comp, data, None, {0: [(10**9, len(conn))]}, uncompressed_size=size)
    raw = bytearray(path.read_bytes())
    i = raw.index(b"index_pos=") + len(b"index_pos=")
    (index_pos,) = struct.unpack_from("<Q", raw, i)
    if not indexed:
        raw[i : i + 8] = bytes(8)
        del raw[index_pos:]
        path.write_bytes(raw)
    if indexed:
        with polybag.open(path) as r:
            assert r.summary.chunks[0].offset == _first_chunk_offset(raw)
    return _first_chunk_offset(raw)


def _first_chunk_offset(raw: bytes | bytearray) -> int:
    pos = len(b"#ROSBAG V2.0\n")
    (hl,) = struct.unpack_from("<I", raw, pos)
    (dl,) = struct.unpack_from("<I", raw, pos + 4 + hl)
    return pos + 8 + hl + dl


# The child reports its own peak (VmHWM of its address space) as it exits: the rusage of a
# child (os.wait4, RUSAGE_CHILDREN) starts from the parent's high-water mark, because the
# child is forked (or vforked) from it, so it would say more about the test process than
# about the command.
_CHILD = """
import sys
from polybag.cli import main
try:
    rc = main(sys.argv[2:])
finally:
    with open("/proc/self/status") as f:
        hwm = next(line for line in f if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as f:
        f.write(hwm.split()[1])
sys.exit(rc)
"""


def _run(*args: str | Path) -> tuple[int, int, str, str]:
    """``polybag ARGS`` in a child process: exit code, its peak RSS in bytes, stdout, stderr."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak RSS is read from /proc (Linux)")
    with tempfile.TemporaryDirectory() as d:
        peak_file = Path(d) / "peak"
        p = subprocess.run(
            [sys.executable, "-c", _CHILD, str(peak_file), *map(str, args)], capture_output=True, text=True
        )
        peak = int(peak_file.read_text()) * 1024
    return p.returncode, peak, p.stdout, p.stderr


def _expect(cmd: str, rc: int, text: str, out: str, err: str, *, ok_with_summary: bool = False) -> None:
    """``info``/``cat`` fail with exit code 3 and the message on stderr; ``check`` reports
    the problem and exits 1; ``ok_with_summary``: info succeeds without touching the chunk."""
    if cmd == "info" and ok_with_summary:
        assert rc == 0, err
        assert "/bomb" in out and not err
    elif cmd == "check":
        assert rc == 1, (out, err)
        assert "problem" in out and text in out
    else:
        assert rc == 3, (out, err)
        assert "Traceback" not in err
        assert err.startswith(f"polybag {cmd}: error: ") and text in err


# --- the lying zstd frame ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def lying(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[bool, bool], tuple[Path, int]]:
    """(frame states its size, file has a summary) -> (path, chunk offset): a chunk that
    declares 1,000 uncompressed bytes holding a zstd frame of 2 GiB."""
    d = tmp_path_factory.mktemp("lying")
    out = {}
    for states in (True, False):
        frame = _compressed("zstd", _mcap_message(2 * GiB - 31), 2 * GiB, state_size=states)
        assert zstandard.frame_content_size(frame) == (2 * GiB if states else -1)
        for summary in (False, True):
            p = d / f"lying-{'states' if states else 'nosize'}-{'summary' if summary else 'bare'}.mcap"
            out[(states, summary)] = (p, _mcap(p, "zstd", frame, 1000, 0, summary=summary))
            assert p.stat().st_size < 80_000
    return out


@pytest.mark.parametrize("cmd", ["info", "cat", "check"])
@pytest.mark.parametrize("summary", [False, True], ids=["no-summary", "summary"])
@pytest.mark.parametrize("states", [True, False], ids=["frame-states-2GiB", "frame-without-size"])
def test_lying_zstd_frame_stops_at_the_declared_size(lying: Any, states: bool, summary: bool, cmd: str) -> None:
    path, off = lying[(states, summary)]
    rc, peak, out, err = _run(cmd, path)
    text = f"{path}: offset {off}: zstd data decompresses to more than the declared 1000 bytes"
    if states:
        text += " (its frame states 2147483648 bytes)"
    _expect(cmd, rc, text, out, err, ok_with_summary=summary)
    assert peak < SMALL_PEAK, f"{cmd}: peak RSS {peak / MiB:.0f} MiB"


@pytest.mark.parametrize("states", [True, False], ids=["frame-states-256MiB", "frame-without-size"])
@pytest.mark.parametrize("source", ["mapped", "pipe"])
def test_lying_frame_allocates_nothing_in_process(states: bool, source: str) -> None:
    frame = _compressed("zstd", _mcap_message(256 * MiB - 31), 256 * MiB, state_size=states)
    ch = R.ChannelRecord(1, 0, "/bomb", "raw", {})
    data = (
        R.MAGIC
        + R.encode(R.Header("", "bombs"))
        + R.encode(ch)
        + R.encode(R.Chunk(1, 1, 1000, 0, "zstd", frame))
        + R.encode(R.DataEnd(0))
        + R.encode(R.Footer(0, 0, 0))
        + R.MAGIC
    )
    target: Any = data if source == "mapped" else Pipe(data)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="more than the declared 1000 bytes"):
            with polybag.open(target) as r:
                list(r.messages())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB + 2 * len(data), peak


# --- honest but absurd chunks ------------------------------------------------------------------
@pytest.fixture(scope="module")
def zstd_1gib(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[Path, int]]:
    d = tmp_path_factory.mktemp("zstd1g")
    frame = _compressed("zstd", _mcap_message(GiB - 31), GiB)
    crc = _crc(_mcap_message(GiB - 31))
    out = {}
    for summary in (False, True):
        p = d / f"zstd-1GiB-{'summary' if summary else 'bare'}.mcap"
        out[summary] = (p, _mcap(p, "zstd", frame, GiB, crc, summary=summary))
        assert p.stat().st_size < 40_000
    return out


@pytest.mark.parametrize("cmd", ["info", "cat", "check"])
@pytest.mark.parametrize("summary", [False, True], ids=["no-summary", "summary"])
def test_1gib_zstd_mcap_chunk_is_over_the_default_cap(zstd_1gib: Any, summary: bool, cmd: str) -> None:
    path, off = zstd_1gib[summary]
    rc, peak, out, err = _run(cmd, path)
    _expect(cmd, rc, f"{path}: offset {off}: chunk declares 1073741824 uncompressed bytes, {OVER_DEFAULT}", out, err, ok_with_summary=summary)
    assert peak < SMALL_PEAK, f"{cmd}: peak RSS {peak / MiB:.0f} MiB"


@pytest.fixture(scope="module")
def bz2_1gib(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[Path, int]]:
    """A 5 KB bag with one honest 1 GiB bz2 chunk (indexed, and cut before its index)."""
    d = tmp_path_factory.mktemp("bz21g")
    out = {}
    for indexed in (True, False):
        p = d / f"bz2-1GiB-{'indexed' if indexed else 'unindexed'}.bag"
        out[indexed] = (p, _bag(p, "bz2", GiB, indexed=indexed))
        assert p.stat().st_size < 6_000
    return out


@pytest.mark.slow  # making the 1 GiB bz2 stream takes a few seconds of CPU
@pytest.mark.parametrize("cmd", ["info", "cat", "check"])
@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "unindexed"])
def test_1gib_bz2_bag_chunk_is_over_the_default_cap(bz2_1gib: Any, indexed: bool, cmd: str) -> None:
    path, off = bz2_1gib[indexed]
    rc, peak, out, err = _run(cmd, path)
    _expect(cmd, rc, f"{path}: offset {off}: chunk declares 1073741824 uncompressed bytes, {OVER_DEFAULT}", out, err, ok_with_summary=indexed)
    assert peak < SMALL_PEAK, f"{cmd}: peak RSS {peak / MiB:.0f} MiB"


# --- a large chunk under the cap costs about its size --------------------------------------------
@pytest.fixture(scope="module")
def lz4_256mib(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("lz4")
    n = 256 * MiB
    frame = _compressed("lz4", _mcap_message(n - 31), n)
    mcap = d / "lz4-256MiB.mcap"
    _mcap(mcap, "lz4", frame, n, _crc(_mcap_message(n - 31)), summary=False)
    bag = d / "lz4-256MiB.bag"
    _bag(bag, "lz4", n)
    return {"mcap": mcap, "bag": bag}


@pytest.mark.parametrize("cmd", ["info", "cat", "check"])
@pytest.mark.parametrize("fmt", ["mcap", "bag"])
def test_256mib_lz4_chunk_costs_at_most_twice_its_size(lz4_256mib: dict[str, Path], fmt: str, cmd: str) -> None:
    path = lz4_256mib[fmt]
    rc, peak, out, err = _run(cmd, path)
    # the bag's payload (zeros) does not match its definition (uint8[] data): cat prints its
    # bytes, warns once and exits 1; the MCAP channel has no codec, printed the same way, exit 0
    assert rc == (1 if cmd == "cat" and fmt == "bag" else 0), (out, err)
    if cmd == "cat":
        assert "/bomb" in out and "bytes] 00 00" in out
        assert ("cannot decode" in err) == (fmt == "bag")
    if cmd == "check":
        assert "OK, 1 messages read" in out
    assert peak < 2 * 256 * MiB, f"{cmd}: peak RSS {peak / MiB:.0f} MiB"


def test_max_chunk_option_lowers_and_raises_the_cap(lz4_256mib: dict[str, Path]) -> None:
    path = lz4_256mib["mcap"]
    rc, peak, out, err = _run("cat", "--max-chunk", "128M", path)
    assert rc == 3
    assert "chunk declares 268435456 uncompressed bytes, over the 134217728-byte limit" in err and HINT in err
    assert peak < SMALL_PEAK
    # the top-level position works too, and a cap at the size reads the file
    rc, _peak, out, err = _run("--max-chunk", "256M", "cat", path)
    assert rc == 0 and "/bomb" in out, err


def test_max_chunk_bad_size_is_a_usage_error(lz4_256mib: dict[str, Path]) -> None:
    for bad in ("0", "-1", "lots", "12Q"):
        rc, _peak, _out, err = _run("info", "--max-chunk", bad, lz4_256mib["bag"])
        assert rc == 2 and "--max-chunk" in err and "expected a size" in err


# --- the cap in the library and the CLI --------------------------------------------------------
def _small_files(tmp_path: Path) -> dict[str, Path]:
    """One small file per reader: MCAP (zstd and lz4 chunks), bag 2.0 (bz2 and lz4 chunks),
    a #ROSRECORD V1.1 bag and a ULog (copied from the shared corpora)."""
    rows = [("/a", i, i, i, bytes([i % 256]) * 3000) for i in range(200)]
    files: dict[str, Path] = {}
    for comp in ("zstd", "lz4"):
        p = tmp_path / f"{comp}.mcap"
        p.write_bytes(to_bytes(rows, compression=comp, chunk_size=256 << 10))
        files[f"mcap-{comp}"] = p
    for comp in ("bz2", "lz4"):
        p = tmp_path / f"{comp}.bag"
        with BagWriter(p, compression=comp, chunk_size=256 << 10) as w:
            s = w.add_schema("std_msgs/UInt8MultiArray", "ros1msg", b"")
            c = w.add_channel("/a", "ros1", s, {"md5sum": "*"})
            for i in range(200):
                w.write(c, bytes(8) + bytes([i % 256]) * 3000, 10**9 + i)
        files[f"bag-{comp}"] = p
    v11 = tmp_path / "v11.bag"
    v11.write_bytes(b"#ROSRECORD V1.1\n/n\n*\nstd_msgs/Int32\n" + struct.pack("<III", 1, 0, 4) + struct.pack("<i", 7))
    files["bag-1.1"] = v11
    files["ulog"] = CORPORA / "ulog" / "sample_log_small.ulg"
    return files


def test_every_reader_accepts_and_checks_max_chunk_bytes(tmp_path: Path) -> None:
    for name, p in _small_files(tmp_path).items():
        with polybag.open(p) as r:
            n = sum(1 for _ in r.messages())
        assert n > 0, name
        for value in (64 << 20, "64M"):
            with polybag.open(p, max_chunk_bytes=value) as r:
                assert sum(1 for _ in r.messages()) == n, name
        for bad in (0, -1, "lots", 1.5, True):
            with pytest.raises(UsageError, match="size|max_chunk_bytes"):
                polybag.open(p, max_chunk_bytes=bad)


@pytest.mark.parametrize("name", ["mcap-zstd", "mcap-lz4", "bag-bz2", "bag-lz4"])
def test_a_chunk_over_max_chunk_bytes_is_an_error_naming_file_offset_and_option(tmp_path: Path, name: str) -> None:
    p = _small_files(tmp_path)[name]
    with polybag.open(p) as r:
        first = r.summary.chunks[0]
        assert first.uncompressed_size > 100_000
        info_count = r.summary.message_count
    with polybag.open(p, max_chunk_bytes=100_000) as r:
        assert r.summary.message_count == info_count  # the summary/index needs no chunk
        with pytest.raises(ChunkLimitError) as e:
            list(r.messages())
    msg = str(e.value)
    assert msg.startswith(f"{p}: offset {first.offset}: chunk declares {first.uncompressed_size} uncompressed bytes")
    assert "over the 100000-byte limit (raise it with --max-chunk / max_chunk_bytes=)" in msg
    assert isinstance(e.value, FormatError)


def test_cli_max_chunk_is_on_every_command_and_restored_after_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    def parsers(p: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
        yield p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for child in a.choices.values():
                    yield from parsers(child)

    all_parsers = list(parsers(build_parser()))
    assert len(all_parsers) > 20
    for p in all_parsers:
        assert any("--max-chunk" in a.option_strings for a in p._actions), p.prog
    p = _small_files(tmp_path)["bag-lz4"]
    before = compression.max_chunk_bytes()
    assert main(["cat", "--max-chunk", "100K", str(p)]) == 3
    assert "over the 102400-byte limit" in capsys.readouterr().err
    assert compression.max_chunk_bytes() == before == compression.DEFAULT_MAX_CHUNK_BYTES
    assert main(["cat", "--max-chunk", "1M", str(p)]) in (0, 1)  # 1: payloads that do not decode
    assert "over the" not in capsys.readouterr().err
    assert compression.max_chunk_bytes() == before


def test_process_wide_cap_applies_to_readers_opened_under_it(tmp_path: Path) -> None:
    p = _small_files(tmp_path)["mcap-zstd"]
    prev = compression.set_max_chunk_bytes("100K")
    try:
        with polybag.open(p) as r:
            with pytest.raises(ChunkLimitError, match="102400-byte limit"):
                list(r.messages())
        with polybag.open(p, max_chunk_bytes="1M") as r:  # the option wins over the default
            assert sum(1 for _ in r.messages()) == 200
    finally:
        compression.set_max_chunk_bytes(prev)
    assert compression.max_chunk_bytes() == prev


# --- info never decompresses a chunk of a file with a summary or index ---------------------------
def _forbid_decompression(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every way a chunk gets decompressed records a call and fails."""
    calls: list[str] = []

    def fail(name: str) -> Callable[..., Any]:
        def f(*_a: Any, **_k: Any) -> Any:
            calls.append(name)
            raise FormatError(f"{name} called")

        return f

    monkeypatch.setattr(compression, "_zstd_bounded", fail("zstd"))
    monkeypatch.setattr(compression, "_incremental", fail("lz4/bz2"))
    monkeypatch.setattr(lz4fast, "_fast", fail("lz4fast"))
    monkeypatch.setattr(lz4fast, "partial_lz4", fail("partial_lz4"))
    monkeypatch.setattr(bag_chunks, "partial_decompress", fail("partial_decompress"))
    from polybag.formats.bag import scan as bag_scan  # where the unindexed scan calls it

    monkeypatch.setattr(bag_scan, "partial_decompress", fail("partial_decompress"))
    return calls


@pytest.mark.parametrize("name", ["mcap-zstd", "mcap-lz4", "bag-bz2", "bag-lz4"])
def test_info_of_an_indexed_file_decompresses_no_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    p = _small_files(tmp_path)[name]
    calls = _forbid_decompression(monkeypatch)
    for args in (["info", str(p)], ["info", "--json", str(p)]):
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "/a" in out and "200" in out
    assert calls == []
    # the patch does see chunk reads
    assert main(["cat", str(p)]) == 3
    assert calls
    capsys.readouterr()


# --- the decompression functions themselves --------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(
    payload=st.binary(max_size=3000),
    declared=st.one_of(st.none(), st.integers(0, 6000)),
    cap=st.integers(1, 6000),
    comp=st.sampled_from(["zstd", "zstd-nosize", "lz4", "bz2"]),
)
def test_decompress_returns_exactly_the_declared_size_or_raises(payload: bytes, declared: int | None, cap: int, comp: str) -> None:
    name = comp.split("-")[0]
    if comp == "zstd-nosize":
        co = zstandard.ZstdCompressor().compressobj()
        data = co.compress(payload) + co.flush()
    else:
        data = compression.compress(name, payload)
    try:
        out = compression.decompress(name, data, declared, max_bytes=cap)
    except ChunkLimitError as e:
        assert (declared if declared is not None else len(payload)) > cap
        assert HINT in str(e)
        return
    except FormatError:
        assert declared is not None and declared != len(payload)
        return
    assert bytes(out) == payload
    assert declared in (None, len(payload)) and len(payload) <= cap
    assert isinstance(out, (bytes, memoryview))


def test_multi_frame_zstd_chunk_decodes_every_frame() -> None:
    c = zstandard.ZstdCompressor()
    data = c.compress(b"a" * 5000) + c.compress(b"b" * 70) + c.compress(b"")
    assert bytes(compression.decompress("zstd", data, 5070)) == b"a" * 5000 + b"b" * 70
    assert bytes(compression.decompress("zstd", data, None)) == b"a" * 5000 + b"b" * 70
    with pytest.raises(FormatError, match="more than the declared 5000 bytes"):
        compression.decompress("zstd", data, 5000)


def test_a_declared_size_over_the_cap_is_refused_before_decompressing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _forbid_decompression(monkeypatch)
    for name in ("zstd", "lz4", "bz2"):
        with pytest.raises(ChunkLimitError, match=r"x\.bag: offset 7: chunk declares 1001 uncompressed bytes, over the 1000-byte limit"):
            compression.decompress(name, b"not even compressed", 1001, path="x.bag", offset=7, max_bytes=1000)
    with pytest.raises(ChunkLimitError, match="over the 1000-byte limit"):
        lz4fast.decompress_lz4(b"junk", 1001, max_bytes=1000)
    assert calls == []
    # stored chunks are views of the file: nothing to bound
    assert compression.decompress("none", b"x" * 2000, 2000, max_bytes=1000) == b"x" * 2000


@pytest.mark.parametrize("comp", ["zstd", "zstd-nosize", "lz4", "bz2", "lz4fast"])
def test_large_output_grows_in_place(comp: str) -> None:
    n = 64 * MiB
    name = comp.removesuffix("-nosize").removesuffix("fast")
    pieces = (bytes([i]) * MiB for i in range(64))
    data = _compressed(name, pieces, n, state_size=comp != "zstd-nosize")
    tracemalloc.start()
    try:
        if comp == "lz4fast":
            out = lz4fast.decompress_lz4(data, n)
        else:
            out = compression.decompress(name, data, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == n and bytes(out[MiB * 5 : MiB * 5 + 3]) == b"\x05\x05\x05" and out[-1] == 63
    if isinstance(out, memoryview):
        assert out.readonly
    # pieces joined at the end would need twice the output
    assert peak < n * 1.5, f"{comp}: traced peak {peak / MiB:.0f} MiB for a {n / MiB:.0f} MiB output"
    del out


def test_unknown_size_stops_at_the_cap() -> None:
    frame = _compressed("zstd", _zeros(256 * MiB), 256 * MiB, state_size=False)
    tracemalloc.start()
    try:
        with pytest.raises(ChunkLimitError, match=r"zstd data decompresses to more than the 1048576-byte limit"):
            compression.decompress("zstd", frame, None, max_bytes=MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB
    with pytest.raises(ChunkLimitError, match="its frame states 268435456 bytes"):
        compression.decompress("zstd", _compressed("zstd", _zeros(256 * MiB), 256 * MiB), None, max_bytes=MiB)


@pytest.mark.parametrize("comp", ["lz4", "bz2"])
def test_partial_decompress_respects_the_cap(comp: str) -> None:
    n = 8 * MiB
    data = _compressed(comp, (bytes([i]) * MiB for i in range(8)), n)
    cut = data[: len(data) * 3 // 4] if comp == "lz4" else data
    whole = bag_chunks.partial_decompress(comp, cut, 1 << 40)
    assert 0 < len(whole) <= n
    capped = bag_chunks.partial_decompress(comp, cut, 1 << 40, max_bytes=3 * MiB + 5)
    assert len(capped) == 3 * MiB + 5 and bytes(capped) == bytes(whole[: 3 * MiB + 5])
    assert len(bag_chunks.partial_decompress(comp, cut, 1000)) == 1000
    prev = compression.set_max_chunk_bytes(MiB)
    try:
        assert len(bag_chunks.partial_decompress(comp, cut, 1 << 40)) == MiB
    finally:
        compression.set_max_chunk_bytes(prev)


@given(n=st.integers(1, 1 << 40), unit=st.sampled_from(["", "k", "K", "M", "MB", "MiB", "g", "G", "GiB", "T"]))
def test_parse_size(n: int, unit: str) -> None:
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit[:1].lower()]
    if n * mult > 1 << 62:
        with pytest.raises(UsageError):
            compression.parse_size(f"{n}{unit}")
    else:
        assert compression.parse_size(f"{n}{unit}") == n * mult
    assert compression.parse_size("1.5G") == 3 << 29
    for bad in ("", "0", "-5", "G", "1e3", "12Q", "nan", "1.2.3M"):
        with pytest.raises(UsageError, match="expected a size"):
            compression.parse_size(bad)
