"""The fast roslz4 frame decoder agrees with python-lz4 and fails only with polybag errors."""

from __future__ import annotations

import lz4.frame as f
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.errors import FormatError
from polybag.formats.bag.lz4fast import decompress_lz4

BLOCKS = [f.BLOCKSIZE_MAX64KB, f.BLOCKSIZE_MAX256KB, f.BLOCKSIZE_MAX1MB, f.BLOCKSIZE_MAX4MB]


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=3000).map(lambda b: b * 50),
    bs=st.sampled_from(BLOCKS),
    checksum=st.booleans(),
    block_checksum=st.booleans(),
    size=st.booleans(),
)
def test_matches_python_lz4(data, bs, checksum, block_checksum, size):
    c = f.compress(
        data, block_size=bs, content_checksum=checksum, block_checksum=block_checksum, store_size=size,
        block_linked=False,
    )
    assert decompress_lz4(c, len(data)) == data
    with pytest.raises(FormatError):
        decompress_lz4(c, len(data) + 1)
    if data:
        with pytest.raises(FormatError):
            decompress_lz4(c, len(data) - 1)


def test_linked_blocks_fall_back():
    data = bytes(range(256)) * 2000
    c = f.compress(data, block_size=f.BLOCKSIZE_MAX64KB, block_linked=True)
    assert decompress_lz4(c, len(data)) == data


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, 10**6), val=st.integers(0, 255), cut=st.integers(0, 10**6))
def test_damage_gives_format_errors(pos, val, cut):
    data = (b"abcdefgh" * 3000) + bytes(range(256)) * 10
    c = bytearray(f.compress(data, block_size=f.BLOCKSIZE_MAX64KB, content_checksum=True, block_linked=False))
    c[pos % len(c)] = val
    c = c[: max(1, cut % (len(c) + 1))]
    try:
        out = decompress_lz4(bytes(c), len(data))
        assert len(out) == len(data)
    except FormatError:
        pass


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, 10**6), val=st.integers(0, 255), cut=st.integers(0, 10**6))
def test_partial_decoder_salvages_prefixes_and_never_raises(pos, val, cut):
    from polybag.formats.bag.lz4fast import partial_lz4

    data = b"".join(b"record %d;" % i for i in range(4000))
    c = f.compress(data, block_size=f.BLOCKSIZE_MAX64KB, content_checksum=True, block_linked=False)
    cut_c = c[: cut % (len(c) + 1)]
    got = partial_lz4(cut_c, len(data))
    assert data.startswith(got)  # a cut never invents bytes
    bad = bytearray(c)
    bad[pos % len(bad)] = val
    out = partial_lz4(bytes(bad), len(data))  # corruption: any bytes, but no exception
    assert len(out) <= len(data)


def test_shared_lz4_frames_suit_roslz4_and_mcap():
    """compression.compress("lz4") is what rosbag's roslz4 needs (content checksum, independent
    blocks) and what MCAP readers and the bag writer use."""
    import io
    import shutil
    import subprocess

    from mcap.reader import make_reader

    from polybag.io.compression import compress, decompress

    data = b"".join(b"payload %d " % i for i in range(200_000))
    c = compress("lz4", data)
    assert c[:4] == b"\x04\x22\x4d\x18"
    flg = c[4]
    assert flg & 0x04, "content checksum flag must be set (roslz4 refuses frames without it)"
    assert flg & 0x20, "blocks must be independent"
    assert (c[5] >> 4) & 7 == 7, "4 MB blocks"
    assert decompress("lz4", c, len(data)) == data
    assert decompress("roslz4", compress("roslz4", data), len(data)) == data
    # a flipped payload byte is caught by the content checksum
    bad = bytearray(c)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(FormatError):
        decompress("lz4", bytes(bad), len(data))
    # an MCAP file polybag writes with lz4 chunks (compression.compress) reads with the mcap library
    import polybag

    buf = io.BytesIO()
    w = polybag.Writer(buf, format="mcap", compression="lz4")
    sid = w.add_schema("s", "jsonschema", b"{}")
    cid = w.add_channel("/t", "json", sid)
    for i in range(1000):
        w.write(cid, b'{"i": %d}' % i, i, i, i)
    w.close()
    got = [m.data for _s, _c, m in make_reader(io.BytesIO(buf.getvalue())).iter_messages()]
    assert got == [b'{"i": %d}' % i for i in range(1000)]
    # Debian's roslz4 (the C library behind rosbag) decodes the frame
    py = shutil.which("python3", path="/usr/bin")
    if py is None or subprocess.run([py, "-c", "import roslz4"], capture_output=True).returncode:
        pytest.skip("Debian python3-roslz4 not installed")
    small = data[:300_000]
    res = subprocess.run(
        [py, "-c", "import sys, roslz4; sys.stdout.buffer.write(roslz4.decompress(sys.stdin.buffer.read()))"],
        input=compress("lz4", small), capture_output=True, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == small
