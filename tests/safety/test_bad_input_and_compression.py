from __future__ import annotations

import io

import pytest

import polybag
from polybag.errors import FormatError, UnknownFormatError
from polybag.io.compression import compress, decompress


def test_empty_and_unknown_inputs_give_polybag_errors(tmp_path):
    empty = tmp_path / "empty.mcap"
    empty.write_bytes(b"")
    with pytest.raises(UnknownFormatError, match="empty"):
        polybag.open(empty)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world, not a log")
    with pytest.raises(UnknownFormatError, match="offset 0"):
        polybag.open(junk)
    with pytest.raises(UnknownFormatError):
        polybag.open(io.BytesIO(b"xx"))


@pytest.mark.parametrize("name", ["none", "zstd", "lz4", "bz2"])
def test_compression_round_trip_and_bounds(name):
    data = bytes(range(256)) * 400
    packed = compress(name, data)
    assert bytes(decompress(name, packed, len(data))) == data
    with pytest.raises(FormatError):
        decompress(name, packed, len(data) - 1, path="f", offset=7)
    if name != "none":
        with pytest.raises(FormatError):
            decompress(name, packed[: len(packed) // 2], len(data))


def test_lying_size_does_not_allocate():
    packed = compress("zstd", b"\0" * 1000)
    with pytest.raises(FormatError):
        decompress("zstd", packed, 1 << 40)
