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
